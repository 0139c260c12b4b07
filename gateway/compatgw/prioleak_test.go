//go:build linux

package compatgw

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestStackedPriorityTagsNoCleartext: host A's frames to a peer's prefix
// behind a stack of VID-0 tags (802.1ad thrice, 802.1Q four and six
// times), which Linux takes off one after the other (net/core/dev.c,
// __netif_receive_skb_core) and reads as untagged, never leave the
// gateway host's default route in cleartext. The LAN XDP program takes
// two such tags off; it passed the rest to the kernel, which routed the
// frame out of the WAN unencrypted, as it did the single 802.1ad one
// (afxdp's TestFilterPriorityTags). Now such a frame is dropped and
// counted (xdp_drop_vlan).
func TestStackedPriorityTagsNoCleartext(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s, g, wan := routedCompat(t, "cpt", tcpdump, nil)
	hostDev := ""
	links, err := s.HostA.Handle().LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			hostDev = l.Attrs().Name
		}
	}
	gwMAC, err := s.GwA.LinkMAC(s.LANA)
	if err != nil {
		t.Fatal(err)
	}
	hostMAC, err := s.HostA.LinkMAC(hostDev)
	if err != nil {
		t.Fatal(err)
	}
	from, to := netip.AddrPortFrom(twosite.HostA4, 40000), netip.AddrPortFrom(twosite.HostB4, 7777)
	// frame is a UDP datagram from host A to host B behind n tags of
	// TPID tpid and VID 0.
	frame := func(tpid uint16, n int) []byte {
		b := append(append([]byte{}, gwMAC...), hostMAC...)
		for range n {
			b = binary.BigEndian.AppendUint16(b, tpid)
			b = binary.BigEndian.AppendUint16(b, 0)
		}
		b = binary.BigEndian.AppendUint16(b, header.EtherTypeIPv4)
		msg := fmt.Sprintf("%#04x x%d", tpid, n)
		ip := make([]byte, header.IPv4MinLen+header.UDPLen+len(msg))
		header.PutIPv4(ip, &header.IPv4Fields{Protocol: header.ProtoUDP, Src: from.Addr().As4(), Dst: to.Addr().As4()}, header.UDPLen+len(msg))
		u := header.UDP(ip[header.IPv4MinLen:])
		header.PutUDP(u, from.Port(), to.Port(), len(msg))
		copy(u[header.UDPLen:], msg)
		u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, from.Addr(), to.Addr(), len(u)))
		return append(b, ip...)
	}
	_, lan := g.Ports()
	before := lan.Stats().Backend["xdp_drop_vlan"]
	testenv.SendFrames(t, s.HostA, hostDev, frame(0x88a8, 3), frame(0x8100, 4), frame(0x8100, 6))
	if !testenv.PollUntil(5*time.Second, func() bool { return lan.Stats().Backend["xdp_drop_vlan"]-before >= 3 }) {
		t.Errorf("LAN xdp_drop_vlan grew by %d, want 3", lan.Stats().Backend["xdp_drop_vlan"]-before)
	}
	// The control: host A's ping crosses the WAN, encrypted.
	if err := s.HostA.Ping(twosite.HostB4, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	frames, leaks := wanLeaks(t, wan)
	if frames == 0 {
		t.Error("the WAN capture holds no frame, not even the tunnel's: the leak check saw nothing")
	}
	for _, l := range leaks {
		t.Errorf("a frame behind stacked VID-0 tags left the WAN in cleartext: %s", l)
	}
}
