package fastpath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// TestPortOnlyNoRoamWhenSpread: toward a peer we spread our source ports
// over (SrcPorts > 1), data from the endpoint's address but another port
// leaves the endpoint where it is (each inner flow of such a peer comes
// from a port of its own: following them moved our flows between its
// receive queues), and data from a new address still roams; toward a peer
// of one port (plain WireGuard), a port-only change roams (whitepaper
// §2.1: a NAT's new mapping).
func TestPortOnlyNoRoamWhenSpread(t *testing.T) {
	for _, spread := range []bool{false, true} {
		name := "one port"
		if spread {
			name = "spread"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			r.installKeys()
			if spread {
				r.peerBA.SrcPorts = 4
			}
			wb := r.b.workers[0]
			from := func(src netip.AddrPort, mac net.HardwareAddr) *Endpoint {
				t.Helper()
				msg := capture(t, r, 1)[0]
				f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), mac, src.Addr(), wanAddrB, src.Port(), portB, msg)
				sendAll(t, r.wanA, 0, []dataplane.Frame{f})
				wb.inbound(r.clock.Now())
				if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
					t.Fatalf("delivered %d, want 1; drops %v", got, TotalDrops(r.b.Stats()))
				}
				wb.publish(r.clock.Now())
				return r.peerBA.Endpoint.Load()
			}
			before := r.peerBA.Endpoint.Load()
			samePort := netip.AddrPortFrom(before.Dst.Addr(), before.Dst.Port()+1)
			ep := from(samePort, net.HardwareAddr(before.DstMAC[:]))
			switch {
			case spread && ep.Dst != before.Dst:
				t.Errorf("SrcPorts 4: endpoint moved to %v on a port-only change (from %v), want it kept", ep.Dst, before.Dst)
			case !spread && ep.Dst != samePort:
				t.Errorf("SrcPorts 1: endpoint %v after data from %v, want it roamed there", ep.Dst, samePort)
			}
			newSrc := netip.AddrPortFrom(netip.MustParseAddr("198.18.1.99"), 40000)
			if ep := from(newSrc, net.HardwareAddr{2, 0, 0, 0, 0, 0x99}); ep.Dst != newSrc {
				t.Errorf("endpoint %v after data from a new address %v, want it roamed there", ep.Dst, newSrc)
			}
		})
	}
}
