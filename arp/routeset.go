package arp

import "net/netip"

// kernelRoute is one route of the kernel's main table as KernelRoutes
// keeps it. Linux names a route of a table by its destination prefix, TOS
// and priority (Route.Metric: `ip route`'s dst, tos and metric; the FIB
// alias key of net/ipv4/fib_trie.c, and fib6_add_rt2node's for IPv6);
// Route is what NextHop answers from it (IfIndex -1: not unicast).
type kernelRoute struct {
	Route
	tos int
}

// same reports whether a and b are the same route, next hops included.
func (a *kernelRoute) same(b *kernelRoute) bool { return a.tos == b.tos && a.Route.equal(b.Route) }

// sameKey reports whether a and b name the same route of the table.
func (a *kernelRoute) sameKey(b *kernelRoute) bool {
	return a.Prefix == b.Prefix && a.tos == b.tos && a.Metric == b.Metric
}

// routeSet is KernelRoutes' copy of the kernel's main table, kept up to
// date one notification at a time: the routes not ignored, by prefix, in
// the order the kernel listed or announced them, and t, the lookup table
// of the best route of each prefix (the lowest priority, the first of
// equals, as the listing did before). t is immutable once built: add and
// del replace it with a persistent update (bart's InsertPersist /
// DeletePersist: a copy of one path of the trie, O(prefix length), not of
// the table), so that a reader may hold the previous one. A routeSet is
// owned by one goroutine.
type routeSet struct {
	byPrefix map[netip.Prefix][]kernelRoute
	t        *routeTable
}

// newRouteSet builds the set of a listing.
func newRouteSet(routes []kernelRoute) *routeSet {
	s := &routeSet{byPrefix: make(map[netip.Prefix][]kernelRoute), t: new(routeTable)}
	for _, r := range routes {
		s.byPrefix[r.Prefix] = append(s.byPrefix[r.Prefix], r)
	}
	for pfx, rs := range s.byPrefix {
		if b := best(rs); b != nil {
			s.t.Insert(pfx, b.Route)
		}
	}
	return s
}

// best returns the route of rs that NextHop answers from: of those with
// TOS 0, the lowest priority, the first of equals; nil if every route of
// rs has a TOS. A route with a TOS matches only packets of that TOS
// (fib_table_lookup in net/ipv4/fib_trie.c skips an alias whose fa_tos is
// neither 0 nor the flow's), and the fast path asks for every packet
// alike: as the kernel does for TOS 0, it answers from the other routes
// of the prefix, or from a shorter prefix. Chosen before, a TOS route
// answered for all traffic, and which of a prefix's routes won depended
// on whether it was listed (the kernel lists a TOS alias first) or
// followed (an append comes last).
func best(rs []kernelRoute) *kernelRoute {
	var b *kernelRoute
	for i := range rs {
		if rs[i].tos == 0 && (b == nil || rs[i].Metric < b.Metric) {
			b = &rs[i]
		}
	}
	return b
}

// add applies an RTM_NEWROUTE of r (replace: NLM_F_REPLACE was set). It
// returns false when the notification does not say what the table now
// holds, and the caller must list the table again: a route added beside
// another of the same key (IPv4's `ip route append`, an IPv6 multipath
// route gaining a next hop) leaves the kernel choosing between them. A
// key that holds more than one route (aliases) is listed again whatever
// the notification: which of them it replaced is not said.
//
// An add (no replace) of a route already held as r is either a
// notification older than the listing (the follower subscribes before it
// lists) or a second alias that differs from the first only in what a
// kernelRoute leaves out (`ip route append` or `prepend` of the same
// next hop with another proto, src or metrics: the kernel's fib_info
// differs, so it takes both). It is kept as a second route of the key:
// the answer is the same either way, and the next notification of the
// key, with two routes held, lists the table. Counted as the same route,
// the deletion of one alias deleted the key while the kernel still
// routed by the other ("no route" for a prefix the kernel forwards, until
// some other change made it list: TestSharedRouteAliasOfOneNextHop).
func (s *routeSet) add(r kernelRoute, replace bool) bool {
	rs := s.byPrefix[r.Prefix]
	at, n := -1, 0
	for i := range rs {
		if rs[i].sameKey(&r) {
			at, n = i, n+1
		}
	}
	switch {
	case n > 1:
		return false
	case n == 1 && rs[at].same(&r) && !replace:
		s.byPrefix[r.Prefix] = append(rs, r)
		return true
	case n == 1 && rs[at].same(&r):
		return true
	case n == 1 && !replace:
		return false
	case n == 1:
		rs[at] = r
		s.changed(r.Prefix, rs)
		return true
	}
	rs = append(rs, r)
	s.byPrefix[r.Prefix] = rs
	s.changed(r.Prefix, rs)
	return true
}

// del applies an RTM_DELROUTE of r. A route the set does not hold (of
// an ignored interface, or already gone at the listing) changes nothing;
// it returns false (list again) when the key names more than one route,
// or one other than r (one next hop of an IPv6 multipath route removed,
// or an alias of IPv4's `ip route append`).
func (s *routeSet) del(r kernelRoute) bool {
	rs := s.byPrefix[r.Prefix]
	at := -1
	for i := range rs {
		if rs[i].sameKey(&r) {
			if at >= 0 {
				return false
			}
			at = i
		}
	}
	if at < 0 {
		return true
	}
	if !rs[at].same(&r) {
		return false
	}
	rs = append(rs[:at], rs[at+1:]...)
	if len(rs) == 0 {
		delete(s.byPrefix, r.Prefix)
	} else {
		s.byPrefix[r.Prefix] = rs
	}
	s.changed(r.Prefix, rs)
	return true
}

// drop removes every route of r's key: r replaced them (NLM_F_REPLACE)
// out of an ignored interface.
func (s *routeSet) drop(r kernelRoute) {
	rs := s.byPrefix[r.Prefix]
	kept := rs[:0]
	for _, x := range rs {
		if !x.sameKey(&r) {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(rs) {
		return
	}
	if len(kept) == 0 {
		delete(s.byPrefix, r.Prefix)
	} else {
		s.byPrefix[r.Prefix] = kept
	}
	s.changed(r.Prefix, kept)
}

// changed updates t for prefix pfx, whose routes are now rs.
func (s *routeSet) changed(pfx netip.Prefix, rs []kernelRoute) {
	if len(rs) == 0 {
		s.t = s.t.DeletePersist(pfx)
		return
	}
	bp := best(rs)
	cur, ok := s.t.Get(pfx)
	switch {
	case bp == nil && ok:
		s.t = s.t.DeletePersist(pfx)
	case bp == nil, ok && cur.equal(bp.Route):
	default:
		s.t = s.t.InsertPersist(pfx, bp.Route)
	}
}
