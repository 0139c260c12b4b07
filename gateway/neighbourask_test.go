package gateway

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// countedAnswer is a resolver (Options.Resolve or Known) that counts its
// calls in n and answers mac while it is set.
func countedAnswer(n *atomic.Int64, mac *atomic.Pointer[[6]byte]) func(netip.Addr) ([6]byte, bool) {
	return func(netip.Addr) ([6]byte, bool) {
		n.Add(1)
		if m := mac.Load(); m != nil {
			return *m, true
		}
		return [6]byte{}, false
	}
}

// askRig is a rig whose configured peer's endpoint (198.18.0.2) has a next
// hop the neighbour table does not know until mac is set, counting the
// requests (Options.Resolve: an ARP/NDP question on the wire) apart from
// the lookups that ask nothing (Options.Known).
func askRig(t *testing.T) (r *rig, requests, lookups *atomic.Int64, mac *atomic.Pointer[[6]byte]) {
	requests, lookups, mac = new(atomic.Int64), new(atomic.Int64), new(atomic.Pointer[[6]byte])
	r = newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: countedAnswer(requests, mac), known: countedAnswer(lookups, mac)})
	return r, requests, lookups, mac
}

// TestConfiguredEndpointAsksNothing: a peer configured with an endpoint
// whose next hop's MAC is not known, to which nothing is sent, makes no
// ARP/NDP request: neither when it is configured nor at its ticks, as
// Linux's wg0 resolves a next hop only when it sends there. Before, each
// such peer's configuration and evaluation asked (a helper saw three ARP
// requests for every on-link endpoint configured, and a neighbour table
// filling with failed entries). A packet held for it then asks.
func TestConfiguredEndpointAsksNothing(t *testing.T) {
	r, requests, lookups, _ := askRig(t)
	for range 100 { // 5 s
		r.advance(DefaultTickInterval)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d ARP/NDP requests for a configured endpoint nothing was sent to, want 0", n)
	}
	if lookups.Load() == 0 {
		t.Errorf("the configured endpoint's next hop was never looked up")
	}
	fp := r.fp()
	fp.AddHolding(1) // a worker holds a packet for the MAC
	fp.NeedNeighbour.Store(true)
	r.advance(DefaultTickInterval)
	if requests.Load() == 0 {
		t.Errorf("a packet held for the next hop's MAC, and no request")
	}
}

// TestNeedNeighbourNothingHeld: once the packets held for a next hop that
// never answered are gone (dropped after their 3 s, the flag left raised),
// the next hop is no longer asked for once a second for good: Linux's
// failed neighbour entry is asked again only at the next send. The next
// packet held asks again, and its MAC, once known, is taken.
func TestNeedNeighbourNothingHeld(t *testing.T) {
	r, requests, _, mac := askRig(t)
	fp := r.fp()
	fp.AddHolding(1)
	fp.NeedNeighbour.Store(true)
	for range 60 { // 3 s: 5, 10, 20 ... 640 ms, 1 s
		r.advance(DefaultTickInterval)
	}
	if requests.Load() < 5 {
		t.Fatalf("%d requests in 3 s with a packet held, want the backoff's", requests.Load())
	}
	fp.AddHolding(-1) // the worker dropped them (no_neighbour)
	r.advance(DefaultTickInterval)
	was := requests.Load()
	for range 200 { // 10 s
		r.advance(DefaultTickInterval)
	}
	if n := requests.Load() - was; n != 0 {
		t.Errorf("%d requests in 10 s with nothing held, want 0", n)
	}
	m := [6]byte{2, 0, 0, 0, 0, 7}
	mac.Store(&m)
	fp.AddHolding(1)
	for waited := time.Duration(0); waited <= time.Second && fp.Endpoint.Load().DstMAC != m; waited += DefaultTickInterval {
		r.advance(DefaultTickInterval)
	}
	if ep := fp.Endpoint.Load(); ep.DstMAC != m || fp.NeedNeighbour.Load() {
		t.Errorf("endpoint %+v (NeedNeighbour %v) once a packet is held again and the MAC known, want %x", ep, fp.NeedNeighbour.Load(), m)
	}
}

// TestIdleSweepAsksNothing: an idle peer whose endpoint has its next
// hop's MAC, that next hop's neighbour entry then gone (flushed, aged
// out) or its route moved to a next hop not known: the sweep after the
// change only looks, and takes the MAC back (the next packet, held, will
// ask), as Linux asks nothing until it sends. It asked for every idle
// peer's next hop at once.
func TestIdleSweepAsksNothing(t *testing.T) {
	var changes atomic.Uint64
	requests, lookups, mac := new(atomic.Int64), new(atomic.Int64), new(atomic.Pointer[[6]byte])
	m := [6]byte{2, 0, 0, 0, 0, 7}
	mac.Store(&m)
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: countedAnswer(requests, mac), known: countedAnswer(lookups, mac),
		routed: func(netip.Addr) bool { return true }, resolveChanges: changes.Load})
	fp := r.fp()
	for range 40 {
		r.advance(DefaultTickInterval)
	}
	if ep := fp.Endpoint.Load(); ep.DstMAC != m {
		t.Fatalf("endpoint %+v, want MAC %x", ep, m)
	}
	changes.Add(1) // a change the next hop survives: the sweep looks, and records it as the route's
	for range 40 {
		r.advance(DefaultTickInterval)
	}
	was := requests.Load()
	mac.Store(nil)
	changes.Add(1)
	for range 100 { // 5 s
		r.advance(DefaultTickInterval)
	}
	if n := requests.Load() - was; n != 0 {
		t.Errorf("%d ARP/NDP requests for an idle peer's next hop after its neighbour went, nothing sent; want 0", n)
	}
	if ep := fp.Endpoint.Load(); ep.DstMAC != ([6]byte{}) {
		t.Errorf("endpoint %+v kept the MAC of a next hop the resolver no longer gives", ep)
	}
}

// TestEndpointWithoutNeighbourNoHandshake: an endpoint set (wg set ...
// endpoint) while its next hop has no MAC yet, on a confirmed session,
// starts no handshake: the data a worker holds for it (raising
// HandshakeNeeded and NeedNeighbour, as before the fix the workers did)
// waits for the MAC, which a later tick resolves, and leaves with the
// session it has. Before, the tick initiated whenever the MAC was
// unknown: one handshake more than needed.
func TestEndpointWithoutNeighbourNoHandshake(t *testing.T) {
	var known atomic.Bool
	known.Store(true)
	mac := [6]byte{2, 0, 0, 0, 0, 9}
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: func(netip.Addr) ([6]byte, bool) {
		if known.Load() {
			return mac, true
		}
		return [6]byte{}, false
	}})
	fp := r.fp()
	r.establishAsInitiator()
	for range 12 { // past RekeyTimeout, which holds back an initiation after ours
		r.advance(500 * time.Millisecond)
	}
	known.Store(false)
	moved := netip.MustParseAddrPort("198.18.0.3:51820")
	if err := r.dev.IpcSet(strings.NewReader("public_key=" + r.wgPub.Hex() + "\nendpoint=" + moved.String() + "\n")); err != nil {
		t.Fatal(err)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.Dst != moved || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint after the set = %+v, want %v without a MAC", ep, moved)
	}
	mark := r.f.nsent()
	fp.HandshakeNeeded.Store(true) // a worker held data for the peer
	fp.NeedNeighbour.Store(true)
	for range 3 {
		r.advance(10 * time.Millisecond)
	}
	known.Store(true)
	// Resolved again within maxNeighbourBackoff (followNeighbourLocked).
	for waited := time.Duration(0); waited <= time.Duration(maxNeighbourBackoff) && fp.Endpoint.Load().DstMAC != mac; waited += DefaultTickInterval {
		r.advance(DefaultTickInterval)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != mac || fp.NeedNeighbour.Load() {
		t.Errorf("endpoint after the neighbour resolved = %+v (NeedNeighbour %v), want MAC %x", ep, fp.NeedNeighbour.Load(), mac)
	}
	if fp.HandshakeNeeded.Load() {
		t.Errorf("HandshakeNeeded still set with a usable session")
	}
	for range 10 {
		r.advance(500 * time.Millisecond)
	}
	if inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0); len(inits) != 0 {
		t.Errorf("%d initiations after setting an endpoint without a MAC on a confirmed session, want 0", len(inits))
	}
}

// TestNeedNeighbourBackoff: a peer whose endpoint's next hop has no MAC
// (NeedNeighbour) is resolved again minNeighbourBackoff (5 ms) later, then
// twice that, four times ... at most maxNeighbourBackoff apart, not at every tick (10,000 such peers
// cost each 50 ms tick 1.5 ms: BenchmarkTickNeedNeighbour); the MAC, once
// known, is in the endpoint within maxNeighbourBackoff. A flag raised
// while the endpoint already has its MAC is cleared at the next tick, no
// longer resolved at every tick for ever.
func TestNeedNeighbourBackoff(t *testing.T) {
	var known atomic.Bool
	var resolves atomic.Int64
	mac := [6]byte{2, 0, 0, 0, 0, 9}
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: func(netip.Addr) ([6]byte, bool) {
		resolves.Add(1)
		if known.Load() {
			return mac, true
		}
		return [6]byte{}, false
	}})
	fp := r.fp()
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != ([6]byte{}) {
		t.Fatalf("endpoint at start = %+v, want one without a MAC", ep)
	}
	fp.AddHolding(1) // a worker held a packet for the MAC
	fp.NeedNeighbour.Store(true)
	const ticks = 200 // 10 s
	for range ticks {
		r.advance(DefaultTickInterval)
	}
	// 5, 10, 20, 40 ms (each at the next tick here), 80, 160, 320, 640
	// ms, then every second: 18.
	if n := resolves.Load(); n > 20 || n < 14 {
		t.Errorf("%d resolutions in %d ticks without a MAC, want 14 to 20 (backing off to one a second)", n, ticks)
	}
	known.Store(true)
	for waited := time.Duration(0); waited <= time.Duration(maxNeighbourBackoff) && fp.NeedNeighbour.Load(); waited += DefaultTickInterval {
		r.advance(DefaultTickInterval)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.DstMAC != mac || fp.NeedNeighbour.Load() {
		t.Fatalf("endpoint %v after the MAC became known (NeedNeighbour %v), want MAC %x", ep, fp.NeedNeighbour.Load(), mac)
	}
	// A worker read the endpoint before the MAC was stored in it.
	fp.NeedNeighbour.Store(true)
	r.advance(DefaultTickInterval)
	if fp.NeedNeighbour.Load() {
		t.Errorf("NeedNeighbour still set after a tick, the endpoint's MAC known")
	}
}
