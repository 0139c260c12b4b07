//go:build linux

package fastgw

import (
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/arp"
)

// resolver finds next-hop MACs on one interface from the kernel's routes
// and a neighbour table mirrored from the kernel (shared mode).
type resolver struct {
	routes  arp.Resolver
	table   *arp.Table
	ifindex int
	// offWAN, the WAN's resolver's (nil on the LAN's), is told of a
	// destination routed out of another interface.
	offWAN *offWANLog
	// inner is set on the LAN's resolver, whose destinations are inner
	// packets' (innerMapped).
	inner bool
}

// innerMapped reports whether dst, an inner packet's destination, is an
// IPv4-mapped IPv6 address (::ffff:0:0/96, RFC 4291 §2.5.5.2), which
// the LAN's resolver has no route for. Linux routes an IPv6 packet by its
// IPv6 table alone, where such an address matches no IPv4 route (none
// at all but a default route, as a rule: ip6_route_input), while
// arp's tables look up the IPv4 address inside it (for endpoints written
// so, which are sent to as IPv4: README, "Behaviour as a router"): the
// fast path put an IPv6 packet to ::ffff:198.19.1.10 from the tunnel on
// the LAN, at the MAC of the IPv4 host 198.19.1.10, where Linux's wg0
// answers "no route to destination" (TestMappedDestinationNS).
func (r *resolver) innerMapped(dst netip.Addr) bool {
	return r.inner && dst.Is4In6()
}

// Resolve implements fastpath.Resolver.
func (r *resolver) Resolve(dst netip.Addr) ([6]byte, bool) {
	nh, ok := r.nextHop(dst)
	if !ok {
		return [6]byte{}, false
	}
	if mac, ok := r.table.Lookup(nh); ok {
		return mac, true
	}
	r.table.Resolve(nh)
	return [6]byte{}, false
}

// Known is Resolve without the request for a missing neighbour
// (gateway.Options.Known), and without marking the entry used (Peek):
// the table's tick asks again for a used entry gone stale, which a
// lookup for a peer that sends nothing must not make it do.
func (r *resolver) Known(dst netip.Addr) ([6]byte, bool) {
	nh, ok := r.nextHop(dst)
	if !ok {
		return [6]byte{}, false
	}
	return r.table.Peek(nh)
}

// nextHop is the next hop of the route toward dst, if it leads out of
// r's interface.
func (r *resolver) nextHop(dst netip.Addr) (netip.Addr, bool) {
	if r.innerMapped(dst) {
		return netip.Addr{}, false
	}
	nh, ifindex, ok := r.routes.NextHop(dst)
	return nh, ok && (ifindex == 0 || ifindex == r.ifindex)
}

// Changes grows whenever Resolve's answers may have changed: a snapshot of
// the kernel's routes published (shared mode; owned mode's static routes
// do not change while running) or of the neighbour table (an entry
// became usable or unusable, or changed its MAC). gateway.Options.
// ResolveChanges.
func (r *resolver) Changes() uint64 {
	n := r.table.Changes()
	if k, ok := r.routes.(*arp.KernelRoutes); ok {
		n += k.Updates.Load()
	}
	return n
}

// HasRoute implements fastpath.WANRoutes: a route toward dst leads out
// of r's interface. One that leads out of another is told to r.offWAN:
// the workers ask when they drop a control frame as no_wan_route, or
// leave an ICMP error unsent.
func (r *resolver) HasRoute(dst netip.Addr) bool {
	_, ifindex, ok := r.routes.NextHop(dst)
	if ok && ifindex > 0 && ifindex != r.ifindex {
		r.offWAN.note(dst, ifindex, time.Now())
		return false
	}
	return ok
}

// ip6UserMetric is the metric the kernel gives an IPv6 route added
// without one (IP6_RT_PRIO_USER), as the routes into the exception TUN
// are (route); IPv4's are added with 0, the lowest.
const ip6UserMetric = 1024

// PrefixLen implements fastpath.RouteLengths: the length of the prefix
// of the route toward dst (the kernel's, arp.KernelRoutes.Route, which
// leaves out the routes into the exception TUN; owned mode's static
// routes, arp.StaticRoutes.Route), or -1 when none covers it; whether
// Linux would prefer it to a route of the same prefix into the exception
// TUN: a kernel IPv6 route of a metric up to ip6UserMetric (the kernel's
// own route of an on-link prefix has 256; one of 1024 has our route's key
// and keeps it: route), an IPv4 route of metric 0, of our route's key,
// which keeps it too (an interface's connected route); one of another
// metric comes after ours; owned mode's static routes have no metric, and
// come after it too; and whether the kernel's route leads off r's interface
// (the LAN's): out of another (a multipath route: the next hop dst
// hashes to, as NextHop), or nowhere (unreachable, blackhole, prohibit: IfIndex
// -1), which the fast path leaves to the host's kernel, as it does a
// destination the main table has no route for (-1, offLAN: the kernel's
// ip rules may pick another table). Owned mode's static routes all lead
// to the LAN. An IPv4-mapped destination has no route (innerMapped): in
// shared mode the host's kernel routes it by its IPv6 table, as Linux
// routes what its wg0 hands it.
func (r *resolver) PrefixLen(dst netip.Addr) (bits int, beforeTunnel, offLAN bool) {
	rl, ok := r.routes.(interface {
		Route(netip.Addr) (arp.Route, bool)
	})
	if !ok {
		return -1, false, false
	}
	_, kernel := r.routes.(*arp.KernelRoutes)
	if r.innerMapped(dst) {
		return -1, false, kernel
	}
	rt, ok := rl.Route(dst)
	if !ok {
		// Not in the main table: the kernel's rules may route it by
		// another (policy routing), or it answers unreachable.
		return -1, false, kernel
	}
	before := rt.Metric == 0
	if rt.Prefix.Addr().Is6() {
		before = rt.Metric <= ip6UserMetric
	}
	_, ifindex := rt.Path(dst)
	return rt.Prefix.Bits(), kernel && before, kernel && (rt.IfIndex < 0 || ifindex != r.ifindex)
}
