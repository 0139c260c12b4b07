package arp

import (
	"math"
	"net/netip"
	"testing"
)

var (
	mpA = netip.MustParseAddr("198.18.0.2")
	mpB = netip.MustParseAddr("198.18.0.3")
	mpC = netip.MustParseAddr("198.18.0.4")
)

// mpRoute is a default route over paths.
func mpRoute(paths ...Path) Route {
	return Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: paths[0].Gateway, IfIndex: paths[0].IfIndex,
		paths: newMultipath(paths)}
}

// dsts returns n consecutive destinations from 198.19.0.1 (peers'
// endpoints are often consecutive: one operator's customers).
func dsts(n int) []netip.Addr { return consecutive(netip.MustParseAddr("198.19.0.1"), n) }

func consecutive(a netip.Addr, n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = a
		a = a.Next()
	}
	return out
}

// TestMultipathSpreadsByWeight: a multipath route's destinations spread
// over its next hops in the shares of their weights (hash-threshold), each
// destination always by the same next hop, also after the route is parsed
// again (a new *multipath of the same next hops).
func TestMultipathSpreadsByWeight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []Path
	}{
		{"1:1", []Path{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 2, Weight: 1}}},
		{"1:3", []Path{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 2, Weight: 3}}},
		{"1:1:2", []Path{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 3, Weight: 1}, {Gateway: mpC, IfIndex: 2, Weight: 2}}},
		{"256:1", []Path{{Gateway: mpA, IfIndex: 2, Weight: 256}, {Gateway: mpB, IfIndex: 2, Weight: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mpRoute(tc.paths...)
			again := mpRoute(append([]Path(nil), tc.paths...)...)
			total := 0
			for _, p := range tc.paths {
				total += p.Weight
			}
			const n = 40000
			got := map[netip.Addr]int{}
			for _, d := range append(dsts(n/2), consecutive(netip.MustParseAddr("2001:2::1"), n/2)...) {
				nh, idx := r.Path(d)
				nh2, idx2 := again.Path(d)
				if nh != nh2 || idx != idx2 {
					t.Fatalf("%v: %v dev %d, then %v dev %d parsed again", d, nh, idx, nh2, idx2)
				}
				if r.NextHop(d) != nh {
					t.Fatalf("%v: NextHop %v, Path %v", d, r.NextHop(d), nh)
				}
				found := false
				for _, p := range tc.paths {
					found = found || p.Gateway == nh && p.IfIndex == idx
				}
				if !found {
					t.Fatalf("%v: %v dev %d is none of the route's next hops", d, nh, idx)
				}
				got[nh]++
			}
			for _, p := range tc.paths {
				want := float64(n) * float64(p.Weight) / float64(total)
				// Binomial: 5 standard deviations, at least 1% of n.
				slack := max(5*math.Sqrt(want*(1-want/n)), n/100)
				if d := float64(got[p.Gateway]) - want; d > slack || d < -slack {
					t.Errorf("%v (weight %d of %d): %d of %d destinations, want %.0f ± %.0f", p.Gateway, p.Weight, total, got[p.Gateway], n, want, slack)
				}
			}
			t.Logf("%v", got)
		})
	}
}

// TestMultipathOnLink: a route of one next hop, and an on-link
// next hop of a multipath route, answer as before: the gateway, or the
// destination itself.
func TestMultipathOnLink(t *testing.T) {
	d := netip.MustParseAddr("198.18.0.77")
	one := Route{Prefix: netip.MustParsePrefix("198.18.0.0/24"), IfIndex: 4}
	if nh, idx := one.Path(d); nh != d || idx != 4 {
		t.Errorf("on-link route: %v dev %d, want %v dev 4", nh, idx, d)
	}
	via := Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: mpA, IfIndex: 4}
	if nh, idx := via.Path(d); nh != mpA || idx != 4 {
		t.Errorf("route via %v: %v dev %d", mpA, nh, idx)
	}
	r := mpRoute(Path{IfIndex: 5, Weight: 1}, Path{IfIndex: 6, Weight: 1})
	seen := map[int]bool{}
	for _, x := range dsts(64) {
		nh, idx := r.Path(x)
		if nh != x {
			t.Fatalf("on-link next hops: %v answers %v", x, nh)
		}
		seen[idx] = true
	}
	if !seen[5] || !seen[6] {
		t.Errorf("64 destinations over two on-link next hops took interfaces %v", seen)
	}
	if got := r.Paths(); len(got) != 2 || got[1].IfIndex != 6 {
		t.Errorf("Paths() = %+v", got)
	}
	if one.Paths() != nil {
		t.Errorf("a route of one next hop has Paths %+v", one.Paths())
	}
}

// TestMultipathPathAllocs: choosing a next hop allocates nothing (the
// LAN side resolves per destination).
func TestMultipathPathAllocs(t *testing.T) {
	r := mpRoute(Path{Gateway: mpA, IfIndex: 2, Weight: 1}, Path{Gateway: mpB, IfIndex: 2, Weight: 2})
	d := netip.MustParseAddr("2001:2::9")
	if n := testing.AllocsPerRun(1000, func() { r.Path(d) }); n != 0 {
		t.Errorf("Path: %v allocations", n)
	}
}

// TestMultipathEqual: two parses of one route are the same route; another
// weight, next hop or order is not.
func TestMultipathEqual(t *testing.T) {
	p := []Path{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 2, Weight: 1}}
	a, b := mpRoute(p...), mpRoute(append([]Path(nil), p...)...)
	if !a.equal(b) {
		t.Errorf("two parses of one route differ")
	}
	for _, o := range [][]Path{
		{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 2, Weight: 2}},
		{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpC, IfIndex: 2, Weight: 1}},
		{{Gateway: mpA, IfIndex: 2, Weight: 1}, {Gateway: mpB, IfIndex: 2, Weight: 1}, {Gateway: mpC, IfIndex: 2, Weight: 1}},
	} {
		if a.equal(mpRoute(o...)) {
			t.Errorf("%+v equals %+v", p, o)
		}
	}
	single := Route{Prefix: a.Prefix, Gateway: mpA, IfIndex: 2}
	if a.equal(single) || single.equal(a) {
		t.Errorf("a multipath route equals the route of its first next hop")
	}
}
