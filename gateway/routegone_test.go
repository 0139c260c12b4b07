package gateway

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
)

// TestEndpointRouteGone: a session's endpoint whose route goes (deleted,
// a blackhole, one out of another interface: Options.Routed false, the
// resolver without an answer) loses its next hop's MAC at the next tick,
// so that the workers stop sending to the old next hop, as Linux's route
// lookup on every send stops wg0's; it gets it back once the route does.
// Before, the MAC of before was kept as long as the session and its rekeys
// lasted (a helper blackholed an endpoint for 4 minutes: every ping still
// answered, a rekey made through it). A MAC that no route gave (the last
// hop of the peer's packets) is kept.
func TestEndpointRouteGone(t *testing.T) {
	var routed atomic.Bool
	routed.Store(true)
	mac := [6]byte{2, 0, 0, 0, 0, 9}
	r, fp := routeRig(t, func(netip.Addr) ([6]byte, bool) { return mac, routed.Load() },
		func(netip.Addr) bool { return routed.Load() })
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != mac {
		t.Fatalf("endpoint = %+v, want next hop %x", ep, mac)
	}
	routed.Store(false)
	r.f.sendData(fp, ourPacket(1)) // traffic: the peer's timers are ticked
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint a tick after its route went = %+v, want no MAC (nothing sent to the old next hop)", ep)
	}
	routed.Store(true)
	waitMAC(r, fp, mac)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != mac {
		t.Errorf("endpoint after the route came back = %+v, want next hop %x", ep, mac)
	}
	// A MAC no route gave (the peer's last hop, the route leading
	// elsewhere all along) is kept.
	routed.Store(false)
	other := [6]byte{2, 0, 0, 0, 0, 7}
	n := *fp.Endpoint.Load()
	n.DstMAC = other
	fp.Endpoint.Store(&n)
	for range 3 {
		r.f.sendData(fp, ourPacket(1))
		r.advance(DefaultTickInterval)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != other {
		t.Errorf("endpoint with its last hop's MAC = %+v, want it kept (%x)", ep, other)
	}
}

// TestEndpointNextHopUnresolved: a session's endpoint whose route still
// leads out of the WAN but whose resolver gives no MAC now (the route
// replaced by one through another next hop not resolved yet, or its
// neighbour failed) loses the old next hop's MAC at the next tick, as
// Linux sends nothing more to the old next hop; the new one's is taken
// once known. Before, the old MAC stayed while the new next hop did not
// answer: everything went to the old router.
func TestEndpointNextHopUnresolved(t *testing.T) {
	var known atomic.Bool
	known.Store(true)
	var mac atomic.Value
	mac.Store([6]byte{2, 0, 0, 0, 0, 9})
	r, fp := routeRig(t, func(netip.Addr) ([6]byte, bool) { return mac.Load().([6]byte), known.Load() },
		func(netip.Addr) bool { return true })
	known.Store(false) // the route moved to a next hop not resolved yet
	r.f.sendData(fp, ourPacket(1))
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint a tick after its next hop went unresolved = %+v, want no MAC", ep)
	}
	next := [6]byte{2, 0, 0, 0, 0, 10}
	mac.Store(next)
	known.Store(true)
	waitMAC(r, fp, next)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != next {
		t.Errorf("endpoint once the new next hop resolved = %+v, want %x", ep, next)
	}
}

// TestEndpointRouteGoneLastHop: once a session's endpoint lost its route,
// a MAC no route gave (the last hop of the peer's packets: a roam, a
// handshake) is taken back too while no route leads out of the WAN, as
// wg0 sends nothing to such an endpoint whatever it receives from it.
// Before, a roam of the peer made the session run through the blackhole.
func TestEndpointRouteGoneLastHop(t *testing.T) {
	var routed atomic.Bool
	routed.Store(true)
	mac := [6]byte{2, 0, 0, 0, 0, 9}
	r, fp := routeRig(t, func(netip.Addr) ([6]byte, bool) { return mac, routed.Load() },
		func(netip.Addr) bool { return routed.Load() })
	routed.Store(false)
	r.f.sendData(fp, ourPacket(1))
	r.advance(DefaultTickInterval)
	// The peer roams to another address, its frames from the last hop.
	n := *fp.Endpoint.Load()
	n.Dst, n.DstMAC = netip.MustParseAddrPort("198.18.0.77:51820"), [6]byte{2, 0, 0, 0, 0, 7}
	fp.Endpoint.Store(&n)
	r.f.sendData(fp, ourPacket(1))
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Errorf("roamed endpoint without a route = %+v, want no MAC", ep)
	}
}

// TestHandshakeReplyWithoutRoute: a peer's handshake initiation from an
// endpoint the WAN has no route to (Options.Routed false: none, a
// blackhole, unreachable or prohibit route, one out of another
// interface) is answered at no next hop's MAC (the workers hold the reply
// and count it no_wan_route after 3 s), and the endpoint it moves the peer
// to has none, as Linux's WireGuard's reply fails its route lookup. With
// a route whose next hop is not resolved yet, the last hop's MAC (the
// frame's source) answers, as before. Before, the last hop answered
// without a route too: a peer whose endpoint an operator had blackholed
// (`ip route add blackhole ENDPOINT`) had its tunnel back through the
// blackhole at its next handshake, 15 s into the blackhole in namespaces.
func TestHandshakeReplyWithoutRoute(t *testing.T) {
	lastHop := [6]byte{2, 0, 0, 0, 0, 2} // fakeDP.deliver's SrcMAC
	for _, c := range []struct {
		name   string
		routed bool
		want   [6]byte
	}{
		{"no route", false, [6]byte{}},
		{"route, next hop unresolved", true, lastHop},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOptions{ourEP: "127.0.0.1:1",
				resolve: func(netip.Addr) ([6]byte, bool) { return [6]byte{}, false },
				routed:  func(netip.Addr) bool { return c.routed },
			})
			r.wgSend(1)
			var resp []sentPacket
			if !r.pump(waitLimit, func() bool {
				resp = ofType(r.f.sentSince(0), 2, 0)
				return len(resp) > 0
			}) {
				t.Fatalf("no handshake response to wireguard-go's initiation; sent %v", types(r.f.sentSince(0)))
			}
			if resp[0].dstMAC != c.want {
				t.Errorf("response sent to MAC %x, want %x", resp[0].dstMAC, c.want)
			}
			if ep := r.fp().Endpoint.Load(); ep == nil || ep.DstMAC != c.want {
				t.Errorf("endpoint after the initiation = %+v, want next hop MAC %x", ep, c.want)
			}
		})
	}
}

// TestEndpointNextHopUnresolvedLastHop: once the resolver has no MAC for
// an endpoint whose route leads out of the WAN (the route moved to a next
// hop that does not answer ARP), the old next hop's MAC, coming back as
// the last hop of a handshake from the peer (the frame's source MAC), is
// not used: the response waits for the route's next hop (no MAC: the
// workers resolve it), and the endpoint gets no MAC, as Linux's wg0 sends
// to the route's next hop only (its reply queued on that next hop's
// neighbour entry, dropped when it fails). A roam of the workers' to
// another port of the address through the old router is taken back at
// the next tick. Once the new next hop resolves, its MAC is taken.
// Before, the response and the endpoint took the last hop's MAC, the
// session's data went to the old router until the next tick took it
// back (up to 50 ms, at each of the peer's handshakes); and before that,
// the MAC taken was forgotten: the peer's next handshake (15 s after its
// data went unanswered, or its rekey) put the session back through the
// old router for as long as it lasted (in namespaces, `ip route replace
// ... via` a silent next hop, then the stock peer's handshake: every ping
// answered through the old router).
func TestEndpointNextHopUnresolvedLastHop(t *testing.T) {
	var known atomic.Bool
	known.Store(true)
	old := [6]byte{2, 0, 0, 0, 0, 2} // fakeDP.deliver's SrcMAC: the old router forwards the peer's frames
	var mac atomic.Value
	mac.Store(old)
	r, fp := routeRig(t, func(netip.Addr) ([6]byte, bool) { return mac.Load().([6]byte), known.Load() },
		func(netip.Addr) bool { return true })
	known.Store(false) // the route moved to a next hop not resolved yet
	r.f.sendData(fp, ourPacket(1))
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint a tick after its next hop went unresolved = %+v, want no MAC", ep)
	}
	// The peer forgets us and handshakes again, its frames from the old
	// router: their last hop.
	ourPub := r.ourKey.PublicKey()
	if err := r.wg.IpcSet(fmt.Sprintf("public_key=%s\nremove=true\n", ourPub.Hex())); err != nil {
		t.Fatal(err)
	}
	if err := r.wg.IpcSet(fmt.Sprintf("public_key=%s\nendpoint=127.0.0.1:1\nallowed_ip=%s/32\n", ourPub.Hex(), ourInner)); err != nil {
		t.Fatal(err)
	}
	since := r.f.nsent()
	r.wgSend(1)
	if !r.pump(waitLimit, func() bool { return len(ofType(r.f.sentSince(since), 2, 0)) > 0 }) {
		t.Fatalf("no response to the peer's new initiation; sent %v", types(r.f.sentSince(since)))
	}
	if resp := ofType(r.f.sentSince(since), 2, 0); resp[0].dstMAC != ([6]byte{}) {
		t.Errorf("response to a handshake from the old next hop sent to MAC %x, want none (wait for the new next hop)", resp[0].dstMAC)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint after a handshake from the old next hop = %+v, want no MAC (nothing to the old next hop)", ep)
	}
	// The workers roam the peer to another port of its address, the
	// frames through the old router (fastpath's roam: the last hop).
	n := *fp.Endpoint.Load()
	n.Dst, n.DstMAC = netip.MustParseAddrPort("198.18.0.2:40000"), old
	fp.Endpoint.Store(&n)
	r.f.sendData(fp, ourPacket(2))
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Errorf("endpoint a tick after a roam to another port through the old next hop = %+v, want no MAC", ep)
	}
	next := [6]byte{2, 0, 0, 0, 0, 10}
	mac.Store(next)
	known.Store(true)
	waitMAC(r, fp, next)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != next {
		t.Errorf("endpoint once the new next hop resolved = %+v, want %x", ep, next)
	}
}

// TestResponseNextHopUnresolvedLastHop: our rekey's response from the
// peer, come through the old router after the endpoint's route moved to a
// next hop not resolved yet, gives the endpoint no MAC (its last hop is
// the old next hop's MAC, which the resolver gave and has none for now),
// and under load the cookie reply to it (whitepaper §5.4.7) waits for the
// new next hop too, as Linux's wg0 sends only to the route's next hop.
// Before, the session went back to the old router until the next tick,
// and the cookie reply went to it.
func TestResponseNextHopUnresolvedLastHop(t *testing.T) {
	for _, underLoad := range []bool{false, true} {
		t.Run(fmt.Sprint("under load ", underLoad), func(t *testing.T) {
			var known atomic.Bool
			known.Store(true)
			old := [6]byte{2, 0, 0, 0, 0, 2} // fakeDP.deliver's SrcMAC
			r, fp := routeRig(t, func(netip.Addr) ([6]byte, bool) { return old, known.Load() },
				func(netip.Addr) bool { return true })
			first := fp.Current.Load()
			known.Store(false) // the route moved to a next hop not resolved yet
			r.f.sendData(fp, ourPacket(1))
			r.advance(DefaultTickInterval)
			if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
				t.Fatalf("endpoint a tick after its next hop went unresolved = %+v, want no MAC", ep)
			}
			r.f.load.Store(underLoad)
			// wireguard-go takes at most one initiation per 20 ms
			// of real time (HandshakeInitationRate).
			time.Sleep(50 * time.Millisecond)
			// Data on a session past RekeyAfterTime: we initiate.
			r.f.clock.Add(rekeyAfterTime)
			since := r.f.nsent()
			r.f.sendData(fp, ourPacket(2))
			r.advance(DefaultTickInterval)
			if underLoad {
				var cr []sentPacket
				if !r.pump(waitLimit, func() bool { cr = ofType(r.f.sentSince(since), 3, 0); return len(cr) > 0 }) {
					t.Fatalf("no cookie reply to the peer's response under load; sent %v", types(r.f.sentSince(since)))
				}
				if cr[0].dstMAC != ([6]byte{}) {
					t.Errorf("cookie reply to a response from the old next hop sent to MAC %x, want none", cr[0].dstMAC)
				}
				return
			}
			if !r.pump(waitLimit, func() bool { return fp.Current.Load() != first }) {
				t.Fatalf("no new session from our rekey; sent %v", types(r.f.sentSince(since)))
			}
			if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
				t.Errorf("endpoint after a response from the old next hop = %+v, want no MAC", ep)
			}
		})
	}
}

// routeRig is a rig whose device has resolve and routed as its
// Options.Resolve and Routed, with a session established (we initiated)
// and a tick past.
func routeRig(t *testing.T, resolve func(netip.Addr) ([6]byte, bool), routed func(netip.Addr) bool) (*rig, *fastpath.Peer) {
	t.Helper()
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: resolve, routed: routed})
	fp := r.fp()
	r.establishAsInitiator()
	r.advance(DefaultTickInterval)
	return r, fp
}

// waitMAC raises fp's NeedNeighbour, as a worker holding a packet for the
// endpoint's MAC does, and ticks until the endpoint has mac or the
// neighbour backoff's longest wait passed.
func waitMAC(r *rig, fp *fastpath.Peer, mac [6]byte) {
	if !fp.Holding() {
		fp.AddHolding(1)
	}
	fp.NeedNeighbour.Store(true)
	for waited := time.Duration(0); waited <= time.Duration(maxNeighbourBackoff) && fp.Endpoint.Load().DstMAC != mac; waited += DefaultTickInterval {
		r.advance(DefaultTickInterval)
	}
}

// TestIdlePeerFollowsRouteChange: a peer that sends and receives nothing
// while its endpoint's route moves has its next hop followed at the next
// tick all the same (the resolver's change count grew), to the new next
// hop's MAC or, while that one is not resolved, to none; a second change
// within nextHopSweepGap waits for the gap. Before, such a peer was ticked
// only at its next packet, which went to the old router.
func TestIdlePeerFollowsRouteChange(t *testing.T) {
	var changes atomic.Uint64
	var known atomic.Bool
	known.Store(true)
	var mac atomic.Value
	old := [6]byte{2, 0, 0, 0, 0, 9}
	mac.Store(old)
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820",
		resolve:        func(netip.Addr) ([6]byte, bool) { return mac.Load().([6]byte), known.Load() },
		routed:         func(netip.Addr) bool { return true },
		resolveChanges: changes.Load})
	fp := r.fp()
	r.establishAsInitiator()
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != old {
		t.Fatalf("endpoint = %+v, want next hop %x", ep, old)
	}
	r.advance(2 * time.Second) // idle: nothing stamped since
	moved := [6]byte{2, 0, 0, 0, 0, 8}
	mac.Store(moved)
	changes.Add(1)
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep.DstMAC != moved {
		t.Fatalf("idle peer a tick after its route moved: next hop %x, want %x", ep.DstMAC, moved)
	}
	// Moved again at once, to a next hop not resolved yet: the sweep
	// waits for its gap, then takes the MAC back.
	known.Store(false)
	changes.Add(1)
	r.advance(DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep.DstMAC != moved {
		t.Fatalf("a second sweep within %v: next hop %x", time.Duration(nextHopSweepGap), ep.DstMAC)
	}
	r.advance(time.Duration(nextHopSweepGap))
	if ep := fp.Endpoint.Load(); ep.DstMAC != ([6]byte{}) {
		t.Fatalf("idle peer after its route moved to an unresolved next hop: next hop %x, want none", ep.DstMAC)
	}
}

// TestSweepAfterChangeDuringTick: a route change that lands while a tick
// evaluates a peer (after the peer read the resolver) is swept for that
// peer at a later tick, within nextHopSweepGap. Before, the sweep read the
// change count after the evaluations, took the change as swept, and
// skipped the peer the tick had evaluated: idle from then on, it kept the
// old next hop until it sent again.
func TestSweepAfterChangeDuringTick(t *testing.T) {
	var changes atomic.Uint64
	var trigger atomic.Bool
	var mac atomic.Value
	old, moved := [6]byte{2, 0, 0, 0, 0, 9}, [6]byte{2, 0, 0, 0, 0, 8}
	mac.Store(old)
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820",
		resolve: func(netip.Addr) ([6]byte, bool) {
			m := mac.Load().([6]byte)
			if trigger.CompareAndSwap(true, false) { // the route moves right after this lookup
				mac.Store(moved)
				changes.Add(1)
			}
			return m, true
		},
		routed:         func(netip.Addr) bool { return true },
		resolveChanges: changes.Load})
	fp := r.fp()
	r.establishAsInitiator()
	r.advance(2 * time.Second)
	trigger.Store(true)
	r.f.sendData(fp, ourPacket(1)) // the next tick evaluates the peer
	r.advance(DefaultTickInterval)
	if trigger.Load() {
		t.Fatal("the peer was not evaluated")
	}
	r.advance(time.Duration(nextHopSweepGap) + DefaultTickInterval)
	if ep := fp.Endpoint.Load(); ep.DstMAC != moved {
		t.Errorf("idle peer %v after a change during its evaluation: next hop %x, want %x", time.Duration(nextHopSweepGap), ep.DstMAC, moved)
	}
}
