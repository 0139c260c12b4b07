package arp

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// kernelModel is a slow, obvious model of a kernel table: its routes in
// order; an add without replace of an existing key appends an alias,
// unless the same route is there (the kernel answers EEXIST).
type kernelModel []kernelRoute

func (m *kernelModel) add(r kernelRoute, replace bool) {
	for i := range *m {
		if (*m)[i].same(&r) && !replace {
			return
		}
	}
	for i := range *m {
		if (*m)[i].sameKey(&r) && replace {
			(*m)[i] = r
			return
		}
	}
	*m = append(*m, r)
}

func (m *kernelModel) del(r kernelRoute) bool {
	for i := range *m {
		if (*m)[i].same(&r) {
			*m = append((*m)[:i], (*m)[i+1:]...)
			return true
		}
	}
	return false
}

// best is the route of pfx NextHop must answer from (routes of TOS 0
// only: best).
func (m kernelModel) best(pfx netip.Prefix) (Route, bool) {
	var b *kernelRoute
	for i := range m {
		if m[i].Prefix == pfx && m[i].tos == 0 && (b == nil || m[i].Metric < b.Metric) {
			b = &m[i]
		}
	}
	if b == nil {
		return Route{}, false
	}
	return b.Route, true
}

// TestRouteSetAgainstModel applies random notifications to a routeSet,
// listing again (newRouteSet of the model) whenever it asks to, and
// compares its table with the model's best routes after each.
func TestRouteSetAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pfxs := []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("198.18.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/25"), netip.MustParsePrefix("2001:2::/64"),
	}
	gws := []netip.Addr{{}, netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3")}
	random := func() kernelRoute {
		r := kernelRoute{
			Route: Route{Prefix: pfxs[rng.IntN(len(pfxs))], Gateway: gws[rng.IntN(len(gws))], IfIndex: 1 + rng.IntN(2),
				Metric: rng.IntN(3) * 100},
			tos: rng.IntN(2) * 4,
		}
		if rng.IntN(8) == 0 {
			// A multipath route: the first next hop is the route's, the
			// second one of a few, each parse a new *multipath.
			r.paths = newMultipath([]Path{{Gateway: r.Gateway, IfIndex: r.IfIndex, Weight: 1},
				{Gateway: gws[1+rng.IntN(2)], IfIndex: 1, Weight: 1 + rng.IntN(2)}})
		}
		return r
	}
	var m kernelModel
	s := newRouteSet(nil)
	listings := 0
	for step := range 20000 {
		r := random()
		var ok bool
		var what string
		switch op := rng.IntN(3); {
		case op == 0 && len(m) > 0:
			// Delete a route the table holds (the kernel's notification
			// names it exactly).
			r = m[rng.IntN(len(m))]
			m.del(r)
			ok, what = s.del(r), "del"
		case op == 1:
			m.add(r, true)
			ok, what = s.add(r, true), "replace"
		default:
			m.add(r, false)
			ok, what = s.add(r, false), "add"
		}
		if !ok {
			s = newRouteSet(m)
			listings++
		}
		for _, pfx := range pfxs {
			want, wok := m.best(pfx)
			got, gok := s.t.Get(pfx)
			if !got.equal(want) || gok != wok {
				t.Fatalf("step %d (%s %+v): table[%v] = %+v, %v; want %+v, %v", step, what, r, pfx, got, gok, want, wok)
			}
		}
	}
	t.Logf("20,000 notifications, %d listings", listings)
}

// TestRouteSetPersistent: a table published before a change answers as
// it did (readers hold it while the follower updates).
func TestRouteSetPersistent(t *testing.T) {
	r := kernelRoute{Route: Route{Prefix: netip.MustParsePrefix("198.18.0.0/24"), IfIndex: 2}}
	s := newRouteSet([]kernelRoute{r})
	old := s.t
	if !s.del(r) {
		t.Fatalf("del(%+v) = false, want true", r)
	}
	if _, ok := old.Get(r.Prefix); !ok {
		t.Errorf("the previous table lost %v after del", r.Prefix)
	}
	if _, ok := s.t.Get(r.Prefix); ok {
		t.Errorf("the new table still has %v after del", r.Prefix)
	}
}
