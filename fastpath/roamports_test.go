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

// TestRoamNoFlipAcrossWorkers: a peer of one source port whose transport
// data comes from two sources at once, each reaching one of two workers
// (one the endpoint, one not), keeps its endpoint while both stay live:
// the worker that sees only the other source does not roam while another
// worker has seen the endpoint within seenQuiet. Before, each worker
// judged by its own packets alone, and the endpoint flipped at every
// publish of either. When the endpoint's source goes quiet, the other
// source takes over within a few publish intervals.
func TestRoamNoFlipAcrossWorkers(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	r.installKeys()
	cur := r.peerBA.Endpoint.Load()
	other := netip.AddrPortFrom(cur.Dst.Addr(), cur.Dst.Port()+1)
	send := func(q int, src netip.AddrPort) {
		t.Helper()
		msg := capture(t, r, 1)[0]
		f := udpFrame(t, r.wanA.Queue(q).TX(), r.wanB.MAC(), net.HardwareAddr(cur.DstMAC[:]), src.Addr(), wanAddrB, src.Port(), portB, msg)
		sendAll(t, r.wanA, q, []dataplane.Frame{f})
		r.b.workers[q].inbound(r.clock.Now())
		if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
			t.Fatalf("delivered %d from %v on queue %d, want 1; drops %v", got, src, q, TotalDrops(r.b.Stats()))
		}
	}
	moves, last := 0, cur.Dst
	// Each worker publishes every PublishInterval, the two half an
	// interval apart; both sources send in every half.
	half := PublishInterval / 2
	for i := range 20 {
		send(0, cur.Dst)
		send(1, other)
		r.clock.Advance(half)
		r.b.workers[i%2].publish(r.clock.Now())
		if ep := r.peerBA.Endpoint.Load().Dst; ep != last {
			moves++
			last = ep
		}
	}
	if moves != 0 || last != cur.Dst {
		t.Errorf("with both sources live the endpoint moved %d times, ending at %v; want it kept at %v", moves, last, cur.Dst)
	}
	// The endpoint's source goes quiet: the other takes over.
	for i := 0; i < 8 && r.peerBA.Endpoint.Load().Dst != other; i++ {
		send(1, other)
		r.clock.Advance(half)
		r.b.workers[i%2].publish(r.clock.Now())
	}
	if ep := r.peerBA.Endpoint.Load().Dst; ep != other {
		t.Errorf("endpoint %v after 4 intervals of data from %v alone, want it roamed there", ep, other)
	}
}

// TestRoamAtOnceWhenQuiet: authenticated data from a new source of a peer
// whose endpoint was heard from, and then nothing for seenQuiet, moves
// the endpoint at once, before the next publish, so that the answer sent
// right after it (a ping's reply) goes to where the peer now is. Before,
// the move waited for the publish (up to 50 ms) and that answer went to
// the old address: one in two first replies lost after a peer changed
// address or port, where Linux's WireGuard follows every packet. Heard
// within seenQuiet, a new source still waits for the publish.
func TestRoamAtOnceWhenQuiet(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.installKeys()
	wb := r.b.workers[0]
	cur := r.peerBA.Endpoint.Load()
	send := func(src netip.AddrPort) {
		t.Helper()
		msg := capture(t, r, 1)[0]
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), net.HardwareAddr(cur.DstMAC[:]), src.Addr(), wanAddrB, src.Port(), portB, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		wb.inbound(r.clock.Now())
		if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
			t.Fatalf("delivered %d from %v, want 1; drops %v", got, src, TotalDrops(r.b.Stats()))
		}
	}
	// Heard from the endpoint, published: seen.
	send(cur.Dst)
	wb.publish(r.clock.Now())
	// A new source within seenQuiet: left to the publish.
	moved := netip.AddrPortFrom(cur.Dst.Addr(), cur.Dst.Port()+7)
	r.clock.Advance(PublishInterval / 2)
	send(moved)
	if ep := r.peerBA.Endpoint.Load().Dst; ep != cur.Dst {
		t.Fatalf("endpoint %v before the publish with the old one heard %v ago, want it kept at %v", ep, PublishInterval/2, cur.Dst)
	}
	wb.publish(r.clock.Now())
	if ep := r.peerBA.Endpoint.Load().Dst; ep != moved {
		t.Fatalf("endpoint %v after the publish, want %v", ep, moved)
	}
	// Heard from there, then silent past seenQuiet; the peer moves again
	// (a new address): the endpoint follows with the packet itself.
	send(moved)
	wb.publish(r.clock.Now())
	r.clock.Advance(3 * PublishInterval)
	again := netip.AddrPortFrom(netip.MustParseAddr("198.18.1.77"), 40077)
	send(again)
	if ep := r.peerBA.Endpoint.Load(); ep.Dst != again || ep.Src != wanAddrB {
		t.Errorf("endpoint %v from %v right after the first packet from %v (old endpoint quiet for %v), want %v from %v",
			ep.Dst, ep.Src, again, 3*PublishInterval, again, wanAddrB)
	}
}

// TestRoamWithoutRouteNoMAC: a peer that roams to a source the WAN has no
// route toward (WANRoutes: a blackhole, an unreachable route, none) gets
// an endpoint without a MAC, so that nothing is sent to the frame's last
// hop, as wg0's route lookup on every send sends nothing there; the
// control plane resolves the MAC once a route comes. Before, the last
// hop's MAC was taken, and the packets of the interval before the
// control plane's next tick went out through the blackhole.
func TestRoamWithoutRouteNoMAC(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.installKeys()
	r.b.cfg.WANResolver = unresolvedRoutes{unresolved{route: false}}
	msg := capture(t, r, 1)[0]
	newSrc := netip.AddrPortFrom(netip.MustParseAddr("198.18.1.99"), 40000)
	newMAC := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}
	wb := r.b.workers[0]
	sendAll(t, r.wanA, 0, []dataplane.Frame{udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), newMAC, newSrc.Addr(), wanAddrB, newSrc.Port(), portB, msg)})
	wb.inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 1 {
		t.Fatalf("delivered %d, want 1; drops %v", got, TotalDrops(r.b.Stats()))
	}
	wb.publish(r.clock.Now())
	if ep := r.peerBA.Endpoint.Load(); ep.Dst != newSrc || ep.DstMAC != ([6]byte{}) {
		t.Errorf("endpoint after roaming to a source without a route = %v via %x, want %v without a MAC", ep.Dst, ep.DstMAC, newSrc)
	}
}
