//go:build linux

package srcaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"github.com/wgpio/wgpio/internal/nlrcvbuf"
	"golang.org/x/sys/unix"
)

// Routes is the source address the kernel chooses toward an endpoint,
// asked of it (RTM_GETROUTE, `ip route get DST`: the route's preferred
// source, else the kernel's source address selection: for IPv4 the
// primary address of the outgoing interface's matching subnet
// (fib_result_prefsrc, net/ipv4/fib_semantics.c), for IPv6 RFC 6724 §5,
// which passes over a deprecated address (ipv6_dev_get_saddr,
// net/ipv6/addrconf.c)) once per endpoint address and cached, as Linux's
// WireGuard sends to a peer it has not heard from with the source its
// route lookup gives (drivers/net/wireguard/socket.c send4/send6, with a
// dst_cache the kernel invalidates when routes change).
//
// The cache holds at most Max addresses (past it, it is emptied and
// fills again with what is asked: the endpoints in use). Changes are
// followed through netlink (every table, so that policy routing counts):
// a route added, removed or replaced drops the answers toward the
// addresses its prefix holds, the only ones whose route it can decide
// (a routing daemon's churn costs the other endpoints nothing), and a
// change of addresses or of a nexthop object (subscribeNexthops), or a
// run of more than maxRunPrefixes route changes, empties the cache. Either moves Generation on, and Changed
// then reports it, once per run of changes.
// Cached never waits; Source, on a miss, takes a netlink round trip
// (some 45 µs): it is for the control plane outside its locks (the first
// send to an endpoint, a change reported), never per packet, nor while a
// configuration is applied. Ask queues a question for a goroutine of
// Routes' own. Questions are asked one at a time (one netlink socket);
// answers are read without waiting for one. Safe for concurrent use;
// Close stops following and asking.
type Routes struct {
	h       *netlink.Handle // asked under askMu
	ns      netns.NsHandle
	max     int
	onErr   func(error)
	changed chan struct{}
	ignore  atomic.Int64 // an interface whose routes are not followed (0: none)
	done    chan struct{}
	wg      sync.WaitGroup

	askMu sync.Mutex // one question at a time on h
	// routeGet is h.RouteGet (a test's failures otherwise); failing says
	// that the last question failed (ask: logged once per run of them).
	routeGet func(net.IP) ([]netlink.Route, error)
	failing  bool // under askMu

	mu     sync.Mutex
	gen    atomic.Uint64             // moved on (under mu) whenever the cache is emptied
	cache  map[netip.Addr]netip.Addr // endpoint address → source (invalid: none)
	queued map[netip.Addr]struct{}   // asked for (Ask), not answered yet
	queue  []netip.Addr              // the order of queued
	bell   chan struct{}             // rung when queue gains one

	// Lookups counts the questions asked of the kernel (tests).
	Lookups atomic.Uint64
}

// DefaultRoutes is the gateways' bound of Routes: the configured
// endpoints of the peers not heard from, which it holds all up to this
// many (about 3 MB); past it, each change asks the kernel again for each
// (a netlink round trip, tens of µs).
const DefaultRoutes = 1 << 16

// routesResubscribe is how long Routes waits before subscribing again
// after its subscription failed (an overrun: ENOBUFS).
const routesResubscribe = time.Second

// NewRoutes asks and follows the kernel of namespace ns (netns.None(): the
// calling thread's; the handle must stay open until Close) for at most
// size cached endpoint addresses (at least 1). onErr, if not nil, receives
// the subscription's errors (after which it subscribes again and
// reports a change) and the first of a run of failed questions (ask).
func NewRoutes(ns netns.NsHandle, size int, onErr func(error)) (*Routes, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("srcaddr: netlink handle: %w", err)
	}
	r := &Routes{
		h: h, ns: ns, max: max(1, size), onErr: onErr,
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
		cache:   map[netip.Addr]netip.Addr{},
		queued:  map[netip.Addr]struct{}{},
		bell:    make(chan struct{}, 1),
	}
	subs, err := r.subscribe()
	if err != nil {
		h.Close()
		return nil, err
	}
	r.routeGet = h.RouteGet
	r.wg.Add(2)
	go r.follow(subs)
	go r.asker()
	return r, nil
}

// Source returns the source the kernel chooses toward dst (an IPv4-mapped
// address as IPv4), invalid when it has no route there (cached too, until
// the next change) or the question failed (not cached: asked again next
// time, see ask). On a miss it asks the
// kernel and waits for the answer (a netlink round trip, behind any
// question in flight): never call it holding a lock others wait on.
func (r *Routes) Source(dst netip.Addr) netip.Addr {
	dst = dst.Unmap()
	if src, ok := r.Cached(dst); ok {
		return src
	}
	r.askMu.Lock()
	defer r.askMu.Unlock()
	// Another may have asked while this one waited for askMu.
	if src, ok := r.Cached(dst); ok {
		return src
	}
	return r.ask(dst)
}

// ask asks the kernel for dst's source and caches the answer, unless the
// cache was emptied meanwhile (the answer may be of before the change).
// The kernel's verdict that there is no route (routeVerdict) is an answer
// too; a question that failed otherwise (ENOBUFS, ENOMEM: memory short
// for a moment) is none: cached, it kept the endpoint on the default
// source until the next change of routes. askMu held.
func (r *Routes) ask(dst netip.Addr) netip.Addr {
	gen := r.gen.Load()
	var src netip.Addr
	r.Lookups.Add(1)
	rs, err := r.routeGet(dst.AsSlice())
	if err != nil && !routeVerdict(err) {
		if !r.failing && r.onErr != nil {
			r.onErr(fmt.Errorf("srcaddr: the route toward %v (asked again at the next send): %w", dst, err))
		}
		r.failing = true
		return src
	}
	r.failing = false
	if err == nil && len(rs) > 0 {
		if a, ok := netip.AddrFromSlice(rs[0].Src); ok {
			src = a.Unmap()
		}
	}
	r.mu.Lock()
	if r.gen.Load() == gen {
		if len(r.cache) >= r.max {
			clear(r.cache)
		}
		r.cache[dst] = src
	}
	r.mu.Unlock()
	return src
}

// routeVerdict reports whether err, RTM_GETROUTE's, is the kernel's
// answer that nothing is sent there (fib_props, net/ipv4/fib_semantics.c,
// and ip6_route_output's: no route, an unreachable, prohibit or blackhole
// route) rather than a failure to answer.
func routeVerdict(err error) bool {
	for _, e := range []error{unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EACCES, unix.EPERM, unix.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Cached returns the cached source toward dst (as Source), ok false when
// none is cached. It never waits for the kernel.
func (r *Routes) Cached(dst netip.Addr) (src netip.Addr, ok bool) {
	dst = dst.Unmap()
	r.mu.Lock()
	src, ok = r.cache[dst]
	r.mu.Unlock()
	return src, ok
}

// Ask has the source toward dst asked of the kernel by a goroutine of
// Routes' own, unless it is cached or already asked for; it never waits.
// At most Max addresses wait (past it, Ask drops the question: asked
// again, it is queued once there is room).
func (r *Routes) Ask(dst netip.Addr) {
	dst = dst.Unmap()
	r.mu.Lock()
	_, cached := r.cache[dst]
	_, queued := r.queued[dst]
	if !cached && !queued && len(r.queue) < r.max {
		r.queued[dst] = struct{}{}
		r.queue = append(r.queue, dst)
		select {
		case r.bell <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

// Generation moves on whenever answers are dropped (a change of routes
// or addresses, Flush): an answer read at one generation is current
// while Generation still returns it.
func (r *Routes) Generation() uint64 { return r.gen.Load() }

// asker answers what Ask queued, one question at a time, until Close.
func (r *Routes) asker() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case <-r.bell:
		}
		for {
			r.mu.Lock()
			if len(r.queue) == 0 {
				r.queue = nil
				r.mu.Unlock()
				break
			}
			dst := r.queue[0]
			r.queue = r.queue[1:]
			delete(r.queued, dst)
			r.mu.Unlock()
			r.Source(dst)
			select {
			case <-r.done:
				return
			default:
			}
		}
	}
}

// Changed receives a value after routes or addresses changed (the
// answers the change may have changed dropped): the sources of the
// endpoints are to be asked again (Cached still has the others).
func (r *Routes) Changed() <-chan struct{} { return r.changed }

// Ignore leaves the changes of the routes through interface ifindex out
// (0: none): fastgw's routes into its exception TUN, two per peer, which
// never carry what is sent to an endpoint.
func (r *Routes) Ignore(ifindex int) { r.ignore.Store(int64(ifindex)) }

// Flush empties the cache (without reporting a change) and moves
// Generation on: the caller knows the addresses changed and asks again
// at once, before the notification of that change reaches Routes.
func (r *Routes) Flush() {
	r.mu.Lock()
	clear(r.cache)
	r.gen.Add(1)
	r.mu.Unlock()
}

// Close stops following and asking, and closes the netlink handle; it
// waits for a question in flight.
func (r *Routes) Close() error {
	close(r.done)
	r.wg.Wait()
	r.h.Close()
	return nil
}

// subscription is what Routes follows: the namespace's route, address and
// nexthop notifications; closing stop ends all three.
type subscription struct {
	routes   chan netlink.RouteUpdate
	addrs    chan netlink.AddrUpdate
	nexthops chan struct{}
	stop     chan struct{}
}

// subscribe subscribes to the namespace's route, address and nexthop
// notifications.
func (r *Routes) subscribe() (subscription, error) {
	s := subscription{
		routes: make(chan netlink.RouteUpdate, 256),
		addrs:  make(chan netlink.AddrUpdate, 64),
		stop:   make(chan struct{}),
	}
	ns := r.ns
	onErr := func(err error) {
		select {
		case <-s.stop: // closed by us: its read error is expected
		default:
			if r.onErr != nil {
				r.onErr(err)
			}
		}
	}
	// The gateway's own routes into its exception TUN (two per peer,
	// thousands at a start or a large reload) come in one burst, which
	// overran the default buffer: a warning, and changes unfollowed
	// until the renewal (routesResubscribe).
	ro := netlink.RouteSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}
	if nlrcvbuf.Forceable(ns) {
		ro.ReceiveBufferSize, ro.ReceiveBufferForceSize = nlrcvbuf.Size, true
	}
	if err := netlink.RouteSubscribeWithOptions(s.routes, s.stop, ro); err != nil {
		close(s.stop)
		return subscription{}, fmt.Errorf("srcaddr: subscribe to routes: %w", err)
	}
	if err := netlink.AddrSubscribeWithOptions(s.addrs, s.stop, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		close(s.stop)
		go drain(s.routes, nil)
		return subscription{}, fmt.Errorf("srcaddr: subscribe to addresses: %w", err)
	}
	nh, err := subscribeNexthops(ns, s.stop, onErr)
	if err != nil {
		close(s.stop)
		go drain(s.routes, s.addrs)
		return subscription{}, fmt.Errorf("srcaddr: subscribe to nexthop objects: %w", err)
	}
	s.nexthops = nh
	return s, nil
}

// subscribeNexthops follows the nexthop objects of namespace ns
// (RTNLGRP_NEXTHOP, Linux 5.3): a route that names one (`ip route add
// PREFIX nhid N`, as routing daemons such as FRR install them) takes
// another next hop, hence perhaps another source, when the object is
// replaced, and with net.ipv4.nexthop_compat_mode = 0 (a daemon's choice
// at scale) the kernel then sends no route notification at all. The
// channel receives a value for each read that holds a nexthop message
// (one pending at most) and is closed when the socket fails (onErr is
// told why) or once stop is closed.
func subscribeNexthops(ns netns.NsHandle, stop chan struct{}, onErr func(error)) (chan struct{}, error) {
	sock, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_NEXTHOP)
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		<-stop
		sock.Close() // ends Receive below
	}()
	go func() {
		defer close(ch)
		for {
			msgs, _, err := sock.Receive()
			if err != nil {
				onErr(fmt.Errorf("srcaddr: nexthop notifications: %w", err))
				return
			}
			for _, m := range msgs {
				if m.Header.Type == unix.RTM_NEWNEXTHOP || m.Header.Type == unix.RTM_DELNEXTHOP {
					select {
					case ch <- struct{}{}:
					default: // one is pending
					}
					break
				}
			}
		}
	}()
	return ch, nil
}

// drain reads the channels of a stopped subscription until netlink's
// readers close them, so that a reader blocked on a full one ends.
func drain(routes chan netlink.RouteUpdate, addrs chan netlink.AddrUpdate) {
	if routes != nil {
		for range routes {
		}
	}
	if addrs != nil {
		for range addrs {
		}
	}
}

// follow drops cached answers and reports a change for every run of
// notifications that may change a source: those toward the prefix of a
// route added or removed (but for a cached clone or the ignored
// interface's), all of them when an address was added, removed or
// changed (its flags: deprecated) or a nexthop object changed. A failed
// subscription is renewed, and counts as a change of everything (what
// it missed is unknown).
func (r *Routes) follow(s subscription) {
	defer r.wg.Done()
	defer func() {
		close(s.stop)
		go drain(s.routes, s.addrs)
	}()
	var c change
	for {
		c.reset()
		failed := false
		select {
		case <-r.done:
			return
		case u, ok := <-s.routes:
			failed = !ok
			if ok && r.counts(&u.Route) {
				c.route(&u.Route)
			}
		case _, ok := <-s.addrs:
			failed, c.all = !ok, true
		case _, ok := <-s.nexthops:
			failed, c.all = !ok, true
		}
		// What else waits belongs to the same run.
		for more := !failed; more; {
			select {
			case u, ok := <-s.routes:
				failed = failed || !ok
				if ok && r.counts(&u.Route) {
					c.route(&u.Route)
				}
				more = ok
			case _, ok := <-s.addrs:
				failed = failed || !ok
				c.all = true
				more = ok
			case _, ok := <-s.nexthops:
				failed = failed || !ok
				c.all = true
				more = ok
			default:
				more = false
			}
		}
		if failed {
			close(s.stop)
			go drain(s.routes, s.addrs)
			for {
				select {
				case <-r.done:
					s = subscription{stop: make(chan struct{})}
					return
				case <-time.After(routesResubscribe):
				}
				var err error
				if s, err = r.subscribe(); err == nil {
					break
				}
				if r.onErr != nil {
					r.onErr(err)
				}
			}
			c.all = true
		}
		if c.any() {
			r.forget(&c)
			select {
			case r.changed <- struct{}{}:
			default: // one is pending
			}
		}
	}
}

// counts reports whether a route notification may change a source.
func (r *Routes) counts(rt *netlink.Route) bool {
	return rt.Flags&unix.RTM_F_CLONED == 0 && (rt.LinkIndex == 0 || int64(rt.LinkIndex) != r.ignore.Load())
}

// maxRunPrefixes bounds the route prefixes of one run of notifications
// whose answers follow drops one by one (a scan of the cache per
// prefix); a run with more (a routing daemon loading a table) empties
// the cache.
const maxRunPrefixes = 64

// change is what a run of notifications may have changed: every answer
// (all), or those toward the prefixes of the routes added, removed or
// replaced in it (a route toward P, in any table, decides the route of
// the addresses in P only).
type change struct {
	all      bool
	prefixes []netip.Prefix
}

func (c *change) reset() { c.all, c.prefixes = false, c.prefixes[:0] }

func (c *change) any() bool { return c.all || len(c.prefixes) > 0 }

// route adds the prefix of rt, or makes c all when rt has none this
// package understands or the run has too many.
func (c *change) route(rt *netlink.Route) {
	if c.all {
		return
	}
	p, ok := routePrefix(rt)
	if !ok || len(c.prefixes) >= maxRunPrefixes {
		c.all = true
		return
	}
	c.prefixes = append(c.prefixes, p)
}

// routePrefix returns the destination prefix of rt (an IPv4 one for an
// IPv4 route; the default route, without Dst, is 0.0.0.0/0 or ::/0 by
// rt's family), or ok false.
func routePrefix(rt *netlink.Route) (p netip.Prefix, ok bool) {
	if rt.Dst == nil {
		switch rt.Family {
		case unix.AF_INET:
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
		case unix.AF_INET6:
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
		}
		return netip.Prefix{}, false
	}
	ones, bits := rt.Dst.Mask.Size()
	a, ok := netip.AddrFromSlice(rt.Dst.IP)
	if !ok || bits == 0 || (bits == 32) != a.Unmap().Is4() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}

// forget drops the answers c names (all of them with c.all) and moves
// Generation on, so that an answer asked before the change is not cached
// after it (ask).
func (r *Routes) forget(c *change) {
	if c.all {
		r.Flush()
		return
	}
	r.mu.Lock()
	for dst := range r.cache {
		for _, p := range c.prefixes {
			if p.Contains(dst) {
				delete(r.cache, dst)
				break
			}
		}
	}
	r.gen.Add(1)
	r.mu.Unlock()
}
