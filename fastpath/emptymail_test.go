package fastpath

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestEmptyMail: an empty message posted to a worker (an empty UDP
// datagram the kernel delivered to the gateway's socket, an empty packet
// for the tunnel, a frame shorter than an Ethernet header) is dropped and
// counted as what it is. The mailbox told its letters apart by which slice
// was not nil, and an empty message's copy is nil: each was taken for a
// control-plane packet of zero value and sent (on an IPv6 WAN, a UDP
// datagram to [::]:0) or counted as no_wan_address.
func TestEmptyMail(t *testing.T) {
	for _, wan6 := range []bool{false, true} {
		t.Run(fmt.Sprint("wan6=", wan6), func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: wan6})
			r.a.cfg.WANResolver.(*staticResolver).def = [6]byte{2, 0, 0, 0, 0, 0x99}
			w := r.a.workers[0]
			src, dst := netip.AddrPortFrom(wanAddrB, portB), netip.AddrPortFrom(wanAddrA, portA)
			for _, c := range []struct {
				name       string
				post       func() bool
				accepted   bool
				fromKernel uint64
				drop       DropReason
			}{
				{"ReceiveWAN empty", func() bool { return r.a.ReceiveWAN(0, src, dst, []byte{}) }, true, 1, DropBadType},
				{"ReceiveWAN nil", func() bool { return r.a.ReceiveWAN(0, src, dst, nil) }, true, 1, DropBadType},
				{"SendTunnel empty", func() bool { return r.a.SendTunnel(0, []byte{}) }, true, 0, DropInnerMalformed},
				{"SendFrame LAN empty", func() bool { return r.a.SendFrame(true, 0, []byte{}) }, false, 0, DropMalformed},
				{"SendFrame WAN nil", func() bool { return r.a.SendFrame(false, 0, nil) }, false, 0, DropMalformed},
				{"SendFrame LAN 13 bytes", func() bool { return r.a.SendFrame(true, 0, make([]byte, 13)) }, false, 0, DropMalformed},
			} {
				s0 := r.a.Stats()[0]
				if got := c.post(); got != c.accepted {
					t.Errorf("%s: returned %v, want %v", c.name, got, c.accepted)
				}
				w.drainMailbox(r.clock.Now())
				s1 := r.a.Stats()[0]
				if n := len(drainPort(r.wanB)) + len(drainPort(r.hostA)); n != 0 {
					t.Errorf("%s: %d frames sent, want none", c.name, n)
				}
				if d := s1.ControlSent - s0.ControlSent; d != 0 {
					t.Errorf("%s: control_sent +%d, want 0", c.name, d)
				}
				if d := s1.FromKernel - s0.FromKernel; d != c.fromKernel {
					t.Errorf("%s: from_kernel +%d, want %d", c.name, d, c.fromKernel)
				}
				d := s1.Drops
				for k := range d {
					d[k] -= s0.Drops[k]
				}
				if d.Total() != 1 || d[c.drop] != 1 {
					t.Errorf("%s: drops %v, want one %v", c.name, d.List(), c.drop)
				}
			}
		})
	}
}
