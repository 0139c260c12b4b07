package arp

import (
	"fmt"
	"net/netip"

	"github.com/gaissmai/bart"
)

// Resolver gives the next hop towards a destination: the address whose MAC
// a frame to dst must carry, and the interface to send it on.
type Resolver interface {
	// NextHop returns dst itself when dst is on-link, the gateway when
	// it is reached through one, and ok false when no route covers dst.
	// It is safe for concurrent use and allocates nothing.
	NextHop(dst netip.Addr) (nexthop netip.Addr, ifindex int, ok bool)
}

// Route is one route: destinations in Prefix are reached through Gateway
// on the interface IfIndex, or directly (on-link) when Gateway is not
// valid.
type Route struct {
	Prefix  netip.Prefix
	Gateway netip.Addr
	IfIndex int
	// Metric is the kernel's priority of the route (`ip route`'s metric:
	// of a prefix's routes the lowest wins); 0 for static routes.
	Metric int
	// paths are a multipath route's next hops (nil for a route of one):
	// Gateway and IfIndex are then the first's, and Path and NextHop
	// choose among them by destination (multipath.go).
	paths *multipath
}

func (r Route) nextHop(dst netip.Addr) (netip.Addr, int, bool) {
	nh, ifindex := r.Path(dst)
	return nh, ifindex, true
}

// NextHop is the address whose MAC a frame to dst sent by r must carry:
// r's gateway, or dst itself when r is on-link; of a multipath route, the
// next hop dst hashes to (Path). Resolver.NextHop's answer for the route
// r.
func (r Route) NextHop(dst netip.Addr) netip.Addr {
	nh, _ := r.Path(dst)
	return nh
}

// RouteView is a Resolver whose routes can be read a snapshot at a time
// (KernelRoutes, StaticRoutes): a caller that forwards a batch of packets
// takes Table once and looks each packet's route up in it, with no
// interface call, lock or allocation per packet, every packet of the batch
// by the same routes.
type RouteView interface {
	Resolver
	// Table returns the routes as they are now; they never change
	// after (a change of the routes makes a new table). Safe for
	// concurrent use; allocates nothing.
	Table() RouteTable
}

// RouteTable is one immutable snapshot of a RouteView's routes. The zero
// RouteTable holds none. Safe for concurrent use.
type RouteTable struct{ t *routeTable }

// Route returns the table's route toward dst: the longest prefix that
// holds it (of the lowest metric, an unreachable or blackhole route
// included with IfIndex -1, as KernelRoutes.Route), or ok false when none
// covers dst. Unlike KernelRoutes.Route, an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) is looked up as IPv6, by the IPv6 routes, as Linux
// routes an IPv6 packet to one (ip6_route_input; header.TransitAddrs lets
// it through), not by the IPv4 route of the address it maps. Allocates
// nothing.
func (t RouteTable) Route(dst netip.Addr) (Route, bool) {
	if t.t == nil {
		return Route{}, false
	}
	return t.t.Lookup(dst.WithZone(""))
}

// routeTable is an immutable longest-prefix-match table.
type routeTable = bart.Table[Route]

func lookupRoute(t *routeTable, dst netip.Addr) (netip.Addr, int, bool) {
	dst = dst.Unmap()
	r, ok := t.Lookup(dst.WithZone(""))
	if !ok {
		return netip.Addr{}, 0, false
	}
	return r.nextHop(dst)
}

// lookupBest returns t's route toward dst (the longest prefix that holds
// it), whether or not it is unicast.
func lookupBest(t *routeTable, dst netip.Addr) (Route, bool) {
	return t.Lookup(dst.Unmap().WithZone(""))
}

// StaticRoutes is the Resolver of owned mode: configured routes, the
// longest prefix wins. Immutable after NewStaticRoutes; safe for
// concurrent use.
type StaticRoutes struct {
	t *routeTable
}

// NewStaticRoutes returns a Resolver over routes. Typical owned-mode use:
// the interface's own prefix on-link ({198.18.0.0/24, no gateway}) and a
// default route ({0.0.0.0/0, gateway 198.18.0.1}). A gateway must be
// on-link through some other route of the set, and of the prefix's family.
func NewStaticRoutes(routes []Route) (*StaticRoutes, error) {
	t := new(routeTable)
	for _, r := range routes {
		if !r.Prefix.IsValid() {
			return nil, fmt.Errorf("arp: static route: invalid prefix %v", r.Prefix)
		}
		r.Prefix = r.Prefix.Masked()
		if r.Gateway.IsValid() {
			r.Gateway = r.Gateway.Unmap()
			if r.Gateway.Is4() != r.Prefix.Addr().Is4() {
				return nil, fmt.Errorf("arp: static route %v: gateway %v of another family", r.Prefix, r.Gateway)
			}
		}
		t.Insert(r.Prefix, r)
	}
	for _, r := range routes {
		if !r.Gateway.IsValid() {
			continue
		}
		g, ok := t.Lookup(r.Gateway.WithZone(""))
		if !ok || g.Gateway.IsValid() {
			return nil, fmt.Errorf("arp: static route %v: gateway %v is not on-link", r.Prefix, r.Gateway)
		}
	}
	return &StaticRoutes{t: t}, nil
}

// NextHop implements Resolver.
func (s *StaticRoutes) NextHop(dst netip.Addr) (netip.Addr, int, bool) {
	return lookupRoute(s.t, dst)
}

// Route returns the route toward dst that NextHop follows (the longest
// prefix that holds dst), or ok false when none covers it. The fast path
// weighs its prefix against an allowed-IPs prefix to decide, as Linux's
// longest-prefix match would, whether a decrypted packet goes to the LAN
// or back into the tunnel, and its IfIndex (KernelRoutes') whether one
// goes to the host's kernel instead (fastpath.RouteLengths, through
// gateway/fastgw). Safe for concurrent use; allocates nothing.
func (s *StaticRoutes) Route(dst netip.Addr) (Route, bool) { return lookupBest(s.t, dst) }

// Table implements RouteView: the routes never change.
func (s *StaticRoutes) Table() RouteTable { return RouteTable{s.t} }
