//go:build linux

package afxdp

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestStrippedPriorityTag: a priority tag (VID 0) that arrives beside the
// frame, as a NIC's RX VLAN offload hands it up (here veth's skb VLAN
// metadata), is read as none, 802.1Q or 802.1ad alike, and the frame's own
// bytes decide: an untagged frame goes to the default port's socket, with
// no tag put in. A stripped 802.1ad tag of VID 0 was passed to the kernel,
// which reads it as none too and routed the frame itself: in compat mode
// (no exception TUN) a LAN host's packet to a peer's prefix went out of
// the WAN unencrypted.
func TestStrippedPriorityTag(t *testing.T) {
	for _, tpid := range []uint16{unix.ETH_P_8021AD, unix.ETH_P_8021Q} {
		p := newVethPair(t, 1)
		port := openIn(t, p.b, p.v.B, Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 5000, PortHi: 5000}}}})
		if s, why := port.StrippedTags(); s != StrippedTagsMetadata {
			t.Fatalf("StrippedTags() = %v (%s), want metadata (veth, Linux 6.8+)", s, why)
		}
		if err := p.tp.VLANAccessTPID(p.a, p.v.A, tpid, 0xa000, false); err != nil { // PCP 5, VID 0
			t.Fatal(err)
		}
		b := make([]byte, 2048)
		mark := []byte("prio-stripped")
		n := udpFrame(b, p.macA, p.macB, netip.AddrPortFrom(p.ipA, 4000), netip.AddrPortFrom(p.ipB, 5000), mark)
		before := port.Stats().Backend["xdp_pass_vlan"]
		testenv.SendFrames(t, p.a, p.v.A, b[:n])
		got := receiveMarked(port, mark, 3*time.Second)
		switch {
		case got == nil:
			t.Errorf("TPID %#04x VID 0 stripped: not received (xdp_pass_vlan %d → %d)", tpid, before, port.Stats().Backend["xdp_pass_vlan"])
		case binary.BigEndian.Uint16(got[12:]) != 0x0800:
			t.Errorf("TPID %#04x VID 0 stripped: received % x, want it untagged", tpid, got[:18])
		}
	}
}
