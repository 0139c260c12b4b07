package gateway

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// askRig is a rig whose configured peer's endpoint (198.18.0.2) has a next
// hop the neighbour table does not know until mac is set, counting the
// requests (Options.Resolve: an ARP/NDP question on the wire) apart from
// the lookups that ask nothing (Options.Known).
func askRig(t *testing.T) (r *rig, requests, lookups *atomic.Int64, mac *atomic.Pointer[[6]byte]) {
	requests, lookups, mac = new(atomic.Int64), new(atomic.Int64), new(atomic.Pointer[[6]byte])
	answer := func(n *atomic.Int64) func(netip.Addr) ([6]byte, bool) {
		return func(netip.Addr) ([6]byte, bool) {
			n.Add(1)
			if m := mac.Load(); m != nil {
				return *m, true
			}
			return [6]byte{}, false
		}
	}
	r = newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", resolve: answer(requests), known: answer(lookups)})
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
