package arp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/nlrcvbuf"
)

// KernelRoutes is the Resolver of shared mode: a snapshot of the kernel's
// main routing table (IPv4 and IPv6), swapped atomically. It lists the
// table once, then follows the kernel's route notifications (RTNLGRP
// IPv4/IPv6 route) one by one, so that a change applies within
// milliseconds and costs the one route it names, however many routes the
// table holds. It lists the table again only when the notifications
// cannot say what it holds:
//   - the notification socket failed (ENOBUFS: the kernel dropped
//     notifications for a full socket; or any other error): it
//     subscribes again, then lists;
//   - a nexthop object (`ip nexthop`) was added, replaced or deleted: the
//     routes through it change or go without a route notification
//     (subscribeNexthops);
//   - a link went down or away, or an IPv4 address was removed: the IPv4
//     FIB then removes the routes through that link or gateway without
//     an RTM_DELROUTE (fib_sync_down_dev / fib_table_flush in
//     net/ipv4/fib_semantics.c and fib_trie.c; `ip monitor route` shows
//     no deletion of a `via` route when its link goes down, the IPv6
//     routes' deletions it does show), so it follows link and address
//     notifications too;
//   - a notification names a key (prefix, TOS, metric) that holds more
//     than one route, or a route other than the one held (routeSet);
//   - Ignore changed the interface left out.
//
// A listing that fails (the kernel out of memory or buffer space for the
// dump) is reported to ErrorCallback and tried again after
// nldump.AgainDelay, doubling up to nldump.AgainMaxDelay, until one
// succeeds: until then the table may hold a route the kernel flushed.
// (Before 6 December a failed listing was dropped, and the table kept
// such a route until some other change made it list again.)
//
// Before 3 December 2026 it listed the whole table at every change and
// every NeighbourResync (5 s) besides, to repair a lost notification; but
// a notification is lost only with ENOBUFS, which ends the subscription
// and so a listing follows anyway, and with fastgw's exception TUN
// routes (two per peer) in the table each listing cost 24 ms of CPU at
// 20,000 peers: 4% of a core while nothing changed.
//
// A multipath route spreads destinations over its next hops (Route.Path:
// hash-threshold by weight, one next hop a destination); routes that are not unicast
// (blackhole, unreachable, prohibit) answer ok false. NextHop is
// lock-free and safe for concurrent use. Close stops following.
type KernelRoutes struct {
	opts  KernelOptions
	h     *netlink.Handle
	unpin func() // closes the namespace handle pinNamespace took
	snap  atomic.Pointer[routeTable]
	set   *routeSet // owned by the follower goroutine (before it starts, by the constructor)
	done  chan struct{}
	wg    sync.WaitGroup
	// closeOnce makes Close safe to call twice, or concurrently.
	closeOnce sync.Once
	// ignore is the interface index Ignore set (0: none); kick asks the
	// follower for a listing once it is set.
	ignore atomic.Int64
	kick   chan struct{}

	// Updates counts the snapshots published (for tests and metrics).
	Updates atomic.Uint64
	// Listings counts the listings of the whole table: one at start,
	// then only for the reasons above.
	Listings atomic.Uint64
}

// NewKernelRoutes lists the kernel's routes and follows their changes. If
// the notification socket fails (an overrun), it subscribes and lists again.
func NewKernelRoutes(opts KernelOptions) (*KernelRoutes, error) {
	unpin, err := opts.pinNamespace()
	if err != nil {
		return nil, fmt.Errorf("arp: kernel routes: %w", err)
	}
	h, err := netlink.NewHandleAt(opts.ns())
	if err != nil {
		unpin()
		return nil, fmt.Errorf("arp: kernel routes: netlink handle: %w", err)
	}
	k := &KernelRoutes{opts: opts, h: h, done: make(chan struct{}), kick: make(chan struct{}, 1), unpin: unpin}
	sub, err := k.subscribe()
	if err != nil {
		close(k.done)
		h.Close()
		unpin()
		return nil, err
	}
	k.wg.Add(1)
	go k.follow(sub)
	return k, nil
}

// routeSub is one subscription: route, link, address and nexthop
// notifications on four sockets, which closing stop closes.
type routeSub struct {
	routes   chan netlink.RouteUpdate
	links    chan netlink.LinkUpdate
	addrs    chan netlink.AddrUpdate
	nexthops <-chan struct{} // nil until subscribed
	stop     chan struct{}
}

// close closes the subscription's sockets and drains its channels until
// netlink's readers close them, so that a reader blocked on a full
// channel ends.
func (s *routeSub) close() {
	close(s.stop)
	go func(r chan netlink.RouteUpdate, l chan netlink.LinkUpdate, a chan netlink.AddrUpdate, n <-chan struct{}) {
		for range r {
		}
		for range l {
		}
		for range a {
		}
		if n != nil {
			for range n {
			}
		}
	}(s.routes, s.links, s.addrs, s.nexthops)
}

// routeRcvbuf is the receive buffer forced on the route notification
// socket (a variable for the overrun test).
var routeRcvbuf = neighbourRcvbuf

// followHook, if set, runs before the follower waits for a notification
// (the overrun test stalls the follower with it).
var followHook func()

// listHook, if set, runs before each listing; an error it returns fails
// the listing (the relist test fails one with it).
var listHook func() error

// subscribe subscribes, then lists, so that no change falls between.
func (k *KernelRoutes) subscribe() (routeSub, error) {
	sub := routeSub{
		routes: make(chan netlink.RouteUpdate, 256),
		links:  make(chan netlink.LinkUpdate, 64),
		addrs:  make(chan netlink.AddrUpdate, 64),
		stop:   make(chan struct{}),
	}
	ns := k.opts.ns()
	onErr := func(err error) {
		select {
		case <-sub.stop: // we closed it: its read error is expected
		default:
			report(k.done, k.opts.ErrorCallback, err)
		}
	}
	// The buffer of the neighbours' socket: a burst of route changes
	// (fastgw's own into its exception TUN, which Ignore leaves out but the
	// socket still receives, 40,000 when 20,000 peers start) overran the
	// default one, and every overrun cost a subscription and a listing.
	// Forced only when the process may (nlrcvbuf.Forceable).
	ro := netlink.RouteSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}
	if nlrcvbuf.Forceable(ns) {
		ro.ReceiveBufferSize, ro.ReceiveBufferForceSize = routeRcvbuf, true
	}
	fail := func(what string, err error) (routeSub, error) {
		sub.close()
		return routeSub{}, fmt.Errorf("arp: kernel routes: subscribe to %s: %w", what, err)
	}
	if err := netlink.RouteSubscribeWithOptions(sub.routes, sub.stop, ro); err != nil {
		// Nothing reads sub.routes: it is closed only by a reader.
		sub.routes = nil
		close(sub.links)
		close(sub.addrs)
		close(sub.stop)
		return routeSub{}, fmt.Errorf("arp: kernel routes: subscribe: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(sub.links, sub.stop, netlink.LinkSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		close(sub.links)
		close(sub.addrs)
		return fail("links", err)
	}
	if err := netlink.AddrSubscribeWithOptions(sub.addrs, sub.stop, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		close(sub.addrs)
		return fail("addresses", err)
	}
	nh, err := subscribeNexthops(ns, sub.stop, onErr)
	if err != nil {
		return fail("nexthops", err)
	}
	sub.nexthops = nh
	if err := k.list(); err != nil {
		sub.close()
		return routeSub{}, err
	}
	return sub, nil
}

// Ignore leaves the routes out of interface ifindex out of the table, and
// their changes are not followed: fastgw's routes into its exception TUN,
// one per allowed-IPs prefix (200,000 at 100,000 peers), which the gateway
// adds and removes itself with every configuration change. NextHop of a
// destination routed there answers from the next best route (the fast
// path never sends through that interface). The routes already listed
// leave the table within milliseconds (the follower lists again). Safe
// for concurrent use; ifindex 0 ignores none.
func (k *KernelRoutes) Ignore(ifindex int) {
	k.ignore.Store(int64(ifindex))
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// ignoredIndex reports whether interface index i is the one Ignore set.
func (k *KernelRoutes) ignoredIndex(i int) bool {
	x := k.ignore.Load()
	return x != 0 && int64(i) == x
}

// followDrain bounds the notifications one wake-up of the follower
// applies before it publishes a snapshot.
const followDrain = 1024

func (k *KernelRoutes) follow(sub routeSub) {
	defer k.wg.Done()
	defer func() { sub.close() }()
	// A failed listing is tried again (each failure reported): the
	// table it would have corrected (a route the kernel flushed without
	// a notification, a notification it could not apply) is wrong until
	// a listing succeeds, and no other change may come to list it again.
	var again nldump.Again
	links := linkStates{}
	for {
		if followHook != nil {
			followHook()
		}
		relist, failed := false, false
		select {
		case <-k.done:
			return
		case <-k.kick:
			relist = true
		case <-again.C:
			again.Fired()
			relist = true
		case u, ok := <-sub.routes:
			if !ok {
				failed = true
				break
			}
			relist = !k.apply(u)
			// Apply what else waits, then publish once. Once a
			// listing is due, what waits is older than it.
			for range followDrain {
				var more bool
				select {
				case u, more = <-sub.routes:
				default:
				}
				if !more {
					// Empty, or closed (seen at the next turn).
					break
				}
				relist = relist || !k.apply(u)
			}
		case u, ok := <-sub.links:
			failed = !ok
			came := ok && links.cameUp(u)
			relist = ok && !k.ignoredIndex(int(u.Index)) && (u.Header.Type == unix.RTM_DELLINK || u.Flags&unix.IFF_UP == 0 || came)
		case u, ok := <-sub.addrs:
			failed = !ok
			relist = ok && !u.NewAddr && u.LinkAddress.IP.To4() != nil && !k.ignoredIndex(u.LinkIndex)
		case _, ok := <-sub.nexthops:
			failed = !ok
			relist = ok
		}
		switch {
		case failed:
			// The subscription failed (reported through ErrorCallback):
			// subscribe and list again.
			sub.close()
			for {
				select {
				case <-k.done:
					sub = routeSub{stop: make(chan struct{})} // for the deferred close
					return
				case <-time.After(resubscribeDelay):
				}
				next, err := k.subscribe()
				if err == nil {
					sub = next
					break
				}
				report(k.done, k.opts.ErrorCallback, err)
			}
			again.After(false) // subscribe listed
		case relist:
			err := k.list()
			if err != nil {
				report(k.done, k.opts.ErrorCallback, err)
			}
			again.After(err != nil)
		case k.snap.Load() != k.set.t:
			k.snap.Store(k.set.t)
			k.Updates.Add(1)
		}
	}
}

// linkStates are the up and carrier flags (IFF_UP, IFF_LOWER_UP) of each
// link as its last notification gave them, for cameUp. Owned by the
// follower; a link leaves it when deleted.
type linkStates map[int32]uint32

// cameUp records u's flags and reports whether the link came up or got
// its carrier since its last notification (or is seen up for the first
// time): the kernel then gives the next hops of multipath routes through
// it their share again (fib_sync_up clears RTNH_F_DEAD and
// RTNH_F_LINKDOWN) without a route notification, so the follower lists
// the table. Before, such a next hop, left out while its link was down,
// stayed out: its peers' share went to the other next hops for as long as
// the routes did not change.
func (l linkStates) cameUp(u netlink.LinkUpdate) bool {
	if u.Header.Type == unix.RTM_DELLINK {
		delete(l, u.Index)
		return false
	}
	f := u.Flags & (unix.IFF_UP | unix.IFF_LOWER_UP)
	old := l[u.Index]
	l[u.Index] = f
	return f&^old != 0
}

// apply applies one route notification to k.set; false: list again.
func (k *KernelRoutes) apply(u netlink.RouteUpdate) bool {
	r := &u.Route
	if r.Table != unix.RT_TABLE_MAIN || r.Flags&unix.RTM_F_CLONED != 0 ||
		k.opts.LinkIndex != 0 && r.LinkIndex != k.opts.LinkIndex {
		return true
	}
	kr, ok := fromKernelRoute(*r)
	if !ok {
		return true
	}
	replace := u.NlFlags&unix.NLM_F_REPLACE != 0
	if k.ignored(r) {
		// Not in the set; but one it replaced leaves it.
		if u.Type == unix.RTM_NEWROUTE && replace {
			k.set.drop(kr)
		}
		return true
	}
	switch u.Type {
	case unix.RTM_NEWROUTE:
		return k.set.add(kr, replace)
	case unix.RTM_DELROUTE:
		return k.set.del(kr)
	}
	return true
}

// ignored reports whether a route (or its notification) goes out of the
// interface Ignore set. A multipath route is never ignored.
func (k *KernelRoutes) ignored(r *netlink.Route) bool {
	return k.ignoredIndex(r.LinkIndex)
}

// list lists the main table and publishes it.
func (k *KernelRoutes) list() error {
	if listHook != nil {
		if err := listHook(); err != nil {
			return fmt.Errorf("arp: kernel routes: list: %w", err)
		}
	}
	filter := &netlink.Route{Table: unix.RT_TABLE_MAIN, LinkIndex: k.opts.LinkIndex}
	mask := uint64(netlink.RT_FILTER_TABLE)
	if k.opts.LinkIndex != 0 {
		mask |= netlink.RT_FILTER_OIF
	}
	routes, err := nldump.Retry(func() ([]netlink.Route, error) { return k.h.RouteListFiltered(netlink.FAMILY_ALL, filter, mask) })
	if err != nil {
		return fmt.Errorf("arp: kernel routes: list: %w", err)
	}
	krs := make([]kernelRoute, 0, len(routes))
	for _, r := range routes {
		if k.ignored(&r) {
			continue
		}
		if kr, ok := fromKernelRoute(r); ok {
			krs = append(krs, kr)
		}
	}
	k.set = newRouteSet(krs)
	k.snap.Store(k.set.t)
	k.Listings.Add(1)
	k.Updates.Add(1)
	return nil
}

// fromKernelRoute converts a netlink route. Non-unicast routes map to a
// Route with IfIndex -1, which NextHop reports as unreachable.
func fromKernelRoute(r netlink.Route) (kernelRoute, bool) {
	var pfx netip.Prefix
	if r.Dst != nil {
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return kernelRoute{}, false
		}
		if r.Family != netlink.FAMILY_V6 {
			// netlink may hand an IPv4 address as 16 bytes; an IPv6
			// route's IPv4-mapped prefix (::ffff:0:0/96 and longer) is
			// IPv6, as Linux's IPv6 table holds it.
			a = a.Unmap()
		}
		ones, _ := r.Dst.Mask.Size()
		pfx = netip.PrefixFrom(a, ones).Masked()
		if !pfx.IsValid() {
			return kernelRoute{}, false
		}
	} else if r.Family == netlink.FAMILY_V6 {
		pfx = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	} else {
		pfx = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	kr := kernelRoute{Route: Route{Prefix: pfx, IfIndex: r.LinkIndex, Metric: r.Priority}, tos: r.Tos}
	if r.Type != 0 && r.Type != unix.RTN_UNICAST {
		kr.IfIndex = -1
		return kr, true
	}
	if len(r.MultiPath) == 0 {
		kr.Gateway, kr.IfIndex = gatewayOf(r.Gw, r.Via, r.Family), r.LinkIndex
		return kr, true
	}
	// A multipath route: its next hops that are not dead (RTNH_F_DEAD:
	// their link is down or gone; Linux gives them no share,
	// fib_rebalance), all of them if every one is (a moment at most: the
	// kernel then flushes the route, fib_table_flush).
	paths := make([]Path, 0, len(r.MultiPath))
	for _, dead := range []bool{false, true} {
		for _, nh := range r.MultiPath {
			if !dead && nh.Flags&unix.RTNH_F_DEAD != 0 {
				continue
			}
			paths = append(paths, Path{Gateway: gatewayOf(nh.Gw, nh.Via, r.Family), IfIndex: nh.LinkIndex, Weight: nh.Hops + 1})
		}
		if len(paths) > 0 {
			break
		}
	}
	kr.Gateway, kr.IfIndex = paths[0].Gateway, paths[0].IfIndex
	if len(paths) > 1 {
		kr.paths = newMultipath(paths)
	}
	return kr, true
}

// gatewayOf returns a route's or next hop's gateway (RTA_GATEWAY, or
// RTA_VIA: an IPv4 route through an IPv6 next hop, `ip route add ... via
// inet6 fe80::1`, Linux 5.2), invalid when it has none (on-link). An
// IPv4 route's IPv4 gateway is unmapped (netlink may hand it as 16 bytes).
func gatewayOf(gw net.IP, via netlink.Destination, family int) netip.Addr {
	if gw == nil {
		if v, ok := via.(*netlink.Via); ok && v != nil {
			gw = v.Addr
		}
	}
	a, ok := netip.AddrFromSlice(gw)
	if !ok {
		return netip.Addr{}
	}
	if family != netlink.FAMILY_V6 && (len(gw) == 4 || a.Is4In6()) {
		a = a.Unmap()
	}
	return a
}

// NextHop implements Resolver.
func (k *KernelRoutes) NextHop(dst netip.Addr) (netip.Addr, int, bool) {
	dst = dst.Unmap()
	r, ok := k.snap.Load().Lookup(dst.WithZone(""))
	if !ok || r.IfIndex < 0 {
		return netip.Addr{}, 0, false
	}
	return r.nextHop(dst)
}

// Route returns the kernel's route toward dst that NextHop follows (the
// longest prefix that holds it, of the lowest metric, of any interface
// but the one Ignore left out, an unreachable or blackhole route included
// with IfIndex -1: Linux's lookup stops there too), or ok false when none
// covers dst. See StaticRoutes.Route. Safe for concurrent use; allocates
// nothing.
func (k *KernelRoutes) Route(dst netip.Addr) (Route, bool) { return lookupBest(k.snap.Load(), dst) }

// Table implements RouteView: the snapshot NextHop and Route read now
// (the main table without the interface Ignore left out), which the
// follower replaces, never changes, at each change of the kernel's
// routes.
func (k *KernelRoutes) Table() RouteTable { return RouteTable{k.snap.Load()} }

// Close stops following the kernel and releases the netlink sockets. A second call (or one concurrent with it) does
// nothing more and returns nil once the first is done.
func (k *KernelRoutes) Close() error {
	k.closeOnce.Do(func() {
		close(k.done)
		k.wg.Wait()
		k.h.Close()
		k.unpin()
	})
	return nil
}
