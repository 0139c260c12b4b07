//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// udpFrame builds an Ethernet frame with an 802.1Q tag of tci in front of
// the EtherType (tagged) or none, carrying UDP/IPv4 with both checksums.
func udpFrame(dst, src net.HardwareAddr, tagged bool, tci uint16, from, to netip.AddrPort, payload []byte) []byte {
	l2 := header.EthernetLen
	if tagged {
		l2 = header.EthernetVLANLen
	}
	b := make([]byte, l2+header.IPv4MinLen+header.UDPLen+len(payload))
	if tagged {
		header.PutEthernetVLAN(b, header.MAC(dst), header.MAC(src), 0, header.EtherTypeIPv4)
		binary.BigEndian.PutUint16(b[14:16], tci) // PCP and DEI too
	} else {
		header.PutEthernet(b, header.MAC(dst), header.MAC(src), header.EtherTypeIPv4)
	}
	ip := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, Src: from.Addr().As4(), Dst: to.Addr().As4()}
	header.PutIPv4(b[l2:], &ip, header.UDPLen+len(payload))
	u := b[l2+header.IPv4MinLen:]
	header.PutUDP(u, from.Port(), to.Port(), len(payload))
	copy(u[header.UDPLen:], payload)
	header.UDP(u).SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, from.Addr(), to.Addr(), len(u)))
	return b
}

func linkMAC(t *testing.T, ns *topo.NS, dev string) net.HardwareAddr {
	t.Helper()
	mac, err := ns.LinkMAC(dev)
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// udpListener listens on addr in ns and returns a function that collects
// the payloads that arrive within wait.
func udpListener(t *testing.T, ns *topo.NS, addr netip.AddrPort) func(wait time.Duration) map[string]bool {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(wait time.Duration) map[string]bool {
		got := map[string]bool{}
		buf := make([]byte, 2048)
		c.SetReadDeadline(time.Now().Add(wait))
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return got
			}
			got[string(buf[:n])] = true
		}
	}
}

// xdpPassVLAN reads a port's xdp_pass_vlan counter.
func xdpPassVLAN(g *fastgw.Gateway, lan bool) uint64 {
	wan, l := g.Ports()
	if lan {
		return l.Stats().Backend["xdp_pass_vlan"]
	}
	return wan.Stats().Backend["xdp_pass_vlan"]
}

// TestVLANIsolation sends, from hostA's side of the LAN, UDP frames to
// gwA's LAN MAC for hostB, in the tunnel's allowed IPs: untagged and
// priority-tagged (VID 0) ones arrive at hostB (the latter untagged), ones
// tagged with VLAN 100 never do and are counted where the XDP program
// leaves them to the kernel. On the WAN, a transport data message to gwA's
// port is WireGuard to gwA untagged (an unknown receiver index), but not
// tagged with VLAN 100.
func TestVLANIsolation(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0) // the tunnel is up
	recv := udpListener(t, s.HostB, netip.AddrPortFrom(twosite.HostB4, 7777))

	lanA := s.FastConfig.LAN
	links := mustLinks(t, s.HostA)
	if len(links) != 1 {
		t.Fatalf("hostA has interfaces %v, want one", links)
	}
	hostDev := links[0]
	gwMAC, hostMAC := linkMAC(t, s.GwA, lanA), linkMAC(t, s.HostA, hostDev)
	from, to := netip.AddrPortFrom(twosite.HostA4, 40000), netip.AddrPortFrom(twosite.HostB4, 7777)
	frame := func(tagged bool, tci uint16, msg string) []byte {
		return udpFrame(gwMAC, hostMAC, tagged, tci, from, to, []byte(msg))
	}
	before := xdpPassVLAN(s.Gateway, true)
	const n = 20
	var frames [][]byte
	for i := range n {
		frames = append(frames,
			frame(false, 0, fmt.Sprintf("untagged-%d", i)),
			frame(true, 0x6000, fmt.Sprintf("priority-%d", i)), // PCP 3, VID 0
			frame(true, 100, fmt.Sprintf("vlan100-%d", i)),
			frame(true, 0x2000|100, fmt.Sprintf("vlan100pcp-%d", i)))
	}
	testenv.SendFrames(t, s.HostA, hostDev, frames...)
	got := recv(3 * time.Second)
	for i := range n {
		for _, m := range []string{"untagged", "priority"} {
			if !got[fmt.Sprintf("%s-%d", m, i)] {
				t.Errorf("%s frame %d did not reach hostB", m, i)
			}
		}
		for _, m := range []string{"vlan100", "vlan100pcp"} {
			if got[fmt.Sprintf("%s-%d", m, i)] {
				t.Errorf("%s frame %d reached hostB through the tunnel", m, i)
			}
		}
	}
	if d := xdpPassVLAN(s.Gateway, true) - before; d != 2*n {
		t.Errorf("LAN xdp_pass_vlan grew by %d, want %d", d, 2*n)
	}

	// WAN: a transport data message (type 4) with a receiver index gwA
	// never gave out.
	wanB := s.WANB
	gwWAN, peerMAC := linkMAC(t, s.GwA, s.FastConfig.WAN), linkMAC(t, s.GwB, wanB)
	msg := make([]byte, 32)
	msg[0] = 4
	binary.LittleEndian.PutUint32(msg[4:8], 0xdeadbeef)
	wfrom, wto := netip.AddrPortFrom(netip.MustParseAddr("198.18.1.2"), 51820), netip.AddrPortFrom(netip.MustParseAddr("198.18.1.1"), 51820)
	unknown := func() uint64 { return fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropUnknownIndex] }
	u0, v0 := unknown(), xdpPassVLAN(s.Gateway, false)
	testenv.SendFrames(t, s.GwB, wanB, udpFrame(gwWAN, peerMAC, true, 100, wfrom, wto, msg))
	waitFor(t, "WAN xdp_pass_vlan to count the tagged message", func() bool { return xdpPassVLAN(s.Gateway, false) == v0+1 })
	time.Sleep(200 * time.Millisecond)
	if u := unknown(); u != u0 {
		t.Errorf("a tagged message to the WAN port was read as WireGuard: unknown_index %d -> %d", u0, u)
	}
	testenv.SendFrames(t, s.GwB, wanB, udpFrame(gwWAN, peerMAC, false, 0, wfrom, wto, msg))
	waitFor(t, "the untagged message to count as unknown_index (the control)", func() bool { return unknown() == u0+1 })
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// mustLinks lists the non-loopback interfaces of ns.
func mustLinks(t *testing.T, ns *topo.NS) []string {
	t.Helper()
	links, err := ns.Handle().LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// TestWANMTU: a tunnel MTU whose outer packets do not fit the WAN MTU
// whole is warned about at start with the numbers (they leave as IP
// fragments, as Linux's WireGuard sends them; before, the start was
// refused), and the WAN port takes that MTU; a WAN MTU lowered while the
// gateway runs is logged with them, and a change of the WAN link that
// leaves its MTU as it was (here its alias; at Close, the XDP program
// detached) is not logged as an MTU change.
func TestWANMTU(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	wan := s.FastConfig.WAN
	if _, err := s.GwA.Run("ip", "link", "set", "dev", wan, "mtu", "1450"); err != nil {
		t.Fatal(err)
	}
	cfg := s.FastConfig
	var logs testenv.LogBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(cfg)
		return err
	}); err != nil {
		t.Fatalf("Start with WAN MTU 1450: %v", err)
	}
	defer g.Close()
	want := "tunnel MTU 1420 + 60 bytes of outer IPv4, UDP and WireGuard headers = 1480, more than the MTU 1450 of WAN " + wan
	if l := logs.String(); !strings.Contains(l, want) || !strings.Contains(l, "leave as IP fragments") || !strings.Contains(l, "lower MTU in [Interface] to 1370") {
		t.Errorf("Start with WAN MTU 1450 logged\n%s\nwant a warning containing %q, the fragments and the MTU that fits IPv4 and IPv6 (1370)", l, want)
	}
	if port, _ := g.Ports(); port.MTU() != 1450 {
		t.Errorf("WAN port MTU %d, want the interface's 1450", port.MTU())
	}
	if _, err := s.GwA.Run("ip", "link", "set", "dev", wan, "alias", "wan-uplink"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GwA.Run("ip", "link", "set", "dev", wan, "mtu", "1470"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a log line about the changed WAN MTU", func() bool {
		l := logs.String()
		return strings.Contains(l, "WAN MTU changed") && strings.Contains(l, "mtu=1470") && strings.Contains(l, "= 1480, more than the MTU 1470")
	})
	// The link updates arrive in order: the alias's came before the
	// MTU's, so it has been seen.
	if l := logs.String(); strings.Contains(l, "mtu=1450") {
		t.Errorf("a WAN alias change, MTU still 1450, was logged as an MTU change:\n%s", l)
	}
}

// TestLANOnVLAN runs gwA's LAN on VLAN 100 of its LAN interface (owned
// address mode), hostA being a host on an access port of that VLAN: its
// frames arrive tagged, in the frame or as the skb's VLAN metadata (as RX
// VLAN offload leaves them), and it drops every frame that comes back
// untagged. Pings and TCP both ways work only if gwA takes the tagged
// frames (ARP included) and tags its replies. In the last case the WAN is
// on VLAN 7 too, gwB's end of it an access port: the tunnel's frames (and
// ARP on the WAN) go tagged both ways.
func TestLANOnVLAN(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, tc := range []struct {
		inband bool
		wan    uint16
	}{{true, 0}, {false, 0}, {true, 7}} {
		t.Run(fmt.Sprintf("inband=%v,wanvlan=%d", tc.inband, tc.wan), func(t *testing.T) {
			s := newSite(t, twosite.Config{Owned: true, LANVLAN: 100, LANVLANInBand: tc.inband, WANVLAN: tc.wan})
			ping(t, s.HostA, twosite.HostB4.String(), 0)
			ping(t, s.HostB, twosite.HostA4.String(), 0)
			tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 1<<20)
			t.Logf("drops: %s", dropsString(s.Gateway))
		})
	}
}
