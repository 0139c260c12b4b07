package arp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestSharedRoutesIncremental: changes of the main table (adds, replaces,
// deletes, of both families) are followed from their notifications alone,
// without listing the table again.
func TestSharedRoutesIncremental(t *testing.T) {
	us, _, v := sharedPair(t)
	idx := linkIndex(t, us, v.A)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	const n = 200
	route := func(i int, gw string) *netlink.Route {
		_, dst, _ := net.ParseCIDR(fmt.Sprintf("198.19.%d.%d/32", i/256, i%256))
		return &netlink.Route{Dst: dst, Gw: net.ParseIP(gw), LinkIndex: idx}
	}
	dst := func(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("198.19.%d.%d", i/256, i%256)) }
	all := func(want func(i int) (netip.Addr, bool)) bool {
		for i := range n {
			nh, _, ok := kr.NextHop(dst(i))
			wnh, wok := want(i)
			if ok != wok || ok && nh != wnh {
				return false
			}
		}
		return true
	}
	for i := range n {
		must(t, us.Handle().RouteAdd(route(i, "198.18.0.2")))
	}
	if !waitFor(time.Second, func() bool { return all(func(int) (netip.Addr, bool) { return kV4, true }) }) {
		t.Fatalf("%d added routes not all followed within a second", n)
	}
	for i := 0; i < n; i += 2 {
		must(t, us.Handle().RouteReplace(route(i, "198.18.0.3")))
	}
	for i := 1; i < n; i += 2 {
		must(t, us.Handle().RouteDel(route(i, "198.18.0.2")))
	}
	_, n6, _ := net.ParseCIDR("2001:2:9::/48")
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: n6, Gw: net.ParseIP("fe80::2"), LinkIndex: idx}))
	dst6 := netip.MustParseAddr("2001:2:9::9")
	if !waitFor(time.Second, func() bool {
		nh, _, ok := kr.NextHop(dst6)
		return ok && nh == kLL && all(func(i int) (netip.Addr, bool) {
			if i%2 == 1 {
				return netip.Addr{}, false
			}
			return netip.MustParseAddr("198.18.0.3"), true
		})
	}) {
		t.Fatalf("replacements and deletions not all followed within a second")
	}
	if got := kr.Listings.Load(); got != 1 {
		t.Errorf("Listings = %d after %d changes, want 1 (the one at start)", got, 2*n+1)
	}
	t.Logf("%d changes in %d snapshots", 2*n+1, kr.Updates.Load())
}

// TestSharedRouteFlushedSilently: the IPv4 FIB removes a route through a
// link that goes down, or through a gateway whose subnet's address is
// removed, without a notification of the route; the follower sees the
// link or address change and lists the table.
func TestSharedRouteFlushedSilently(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush func(us *netlink.Handle, link netlink.Link) error
	}{
		{"link down", func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetDown(l) }},
		{"address removed", func(h *netlink.Handle, l netlink.Link) error {
			a, err := netlink.ParseAddr(usV4.String() + "/24")
			if err != nil {
				return err
			}
			return h.AddrDel(l, a)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us, _, v := sharedPair(t)
			idx := linkIndex(t, us, v.A)
			kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
			must(t, err)
			defer kr.Close()
			dst := addFollowedRoute(t, us, idx, kr)
			l, err := us.Handle().LinkByIndex(idx)
			must(t, err)
			must(t, tc.flush(us.Handle(), l))
			if rs, err := us.Handle().RouteGet(net.ParseIP(dst.String())); err == nil {
				t.Fatalf("the kernel still routes %v (%v): the test does not test", dst, rs)
			}
			if !waitFor(time.Second, func() bool { _, _, ok := kr.NextHop(dst); return !ok }) {
				nh, i, _ := kr.NextHop(dst)
				t.Fatalf("NextHop(%v) = %v, %d a second after the kernel removed its route", dst, nh, i)
			}
		})
	}
}

// TestSharedRouteRelistRetried: a listing that fails (ENOBUFS or ENOMEM
// while the kernel builds the dump) is reported and tried again, and the
// table is right once one succeeds. Before, the failed listing was
// dropped: a route the kernel had flushed silently (here: its gateway's
// subnet address removed) stayed in the table, and traffic went on to the
// dead next hop until some other change made the follower list again.
func TestSharedRouteRelistRetried(t *testing.T) {
	us, _, v := sharedPair(t)
	idx := linkIndex(t, us, v.A)
	// Installed before the follower runs, armed later: fail listings
	// while fail is above 0.
	var fail atomic.Int32
	listHook = func() error {
		if fail.Load() > 0 && fail.Add(-1) >= 0 {
			return syscall.ENOBUFS
		}
		return nil
	}
	defer func() { listHook = nil }() // after kr.Close, deferred later
	kr, errs := routesReporting(t, us)
	defer kr.Close()
	dst := addFollowedRoute(t, us, idx, kr)
	// The next two listings fail.
	fail.Store(2)
	listings := kr.Listings.Load()
	a, err := netlink.ParseAddr(usV4.String() + "/24")
	must(t, err)
	l, err := us.Handle().LinkByIndex(idx)
	must(t, err)
	must(t, us.Handle().AddrDel(l, a))
	if rs, err := us.Handle().RouteGet(net.ParseIP(dst.String())); err == nil {
		t.Fatalf("the kernel still routes %v (%v): the test does not test", dst, rs)
	}
	if !waitFor(3*time.Second, func() bool { _, _, ok := kr.NextHop(dst); return !ok }) {
		nh, i, _ := kr.NextHop(dst)
		t.Fatalf("NextHop(%v) = %v, %d 3 s after the kernel removed its route, its listings failing twice", dst, nh, i)
	}
	if fail.Load() > 0 {
		t.Errorf("%d of the 2 failing listings left: the table changed without them", fail.Load())
	}
	if kr.Listings.Load() == listings {
		t.Errorf("no listing counted after the two failures")
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, syscall.ENOBUFS) {
				t.Errorf("ErrorCallback got %v, want the failed listing's ENOBUFS", err)
			}
		default:
			t.Errorf("ErrorCallback not told of both failed listings")
		}
	}
}

// TestSharedRouteAliasOfOneNextHop: a second route of one key through
// the same next hop, added by another proto (`ip route append` or
// `prepend`: the kernel keeps both, their fib_info differing), and the
// deletion of the first leave the follower routing by the second, as the
// kernel does; it answered "no route" until some other change made it
// list the table.
func TestSharedRouteAliasOfOneNextHop(t *testing.T) {
	for _, how := range []string{"append", "prepend"} {
		t.Run(how, func(t *testing.T) {
			us, _, v := sharedPair(t)
			kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
			must(t, err)
			defer kr.Close()
			ip := func(args ...string) {
				t.Helper()
				if out, err := us.Run("ip", args...); err != nil {
					t.Fatalf("ip %v: %v: %s", args, err, out)
				}
			}
			// followed waits until the follower has applied the
			// notifications so far: a marker route's is behind them.
			marker := 0
			followed := func() {
				t.Helper()
				marker++
				m := fmt.Sprintf("198.19.200.%d", marker)
				ip("route", "add", m+"/32", "via", kV4.String(), "dev", v.A)
				if !waitFor(time.Second, func() bool { _, _, ok := kr.NextHop(netip.MustParseAddr(m)); return ok }) {
					t.Fatalf("marker route %v not followed", m)
				}
			}
			ip("route", "add", "198.19.1.0/24", "via", kV4.String(), "dev", v.A, "proto", "boot")
			ip("route", how, "198.19.1.0/24", "via", kV4.String(), "dev", v.A, "proto", "static")
			followed()
			ip("route", "del", "198.19.1.0/24", "proto", "boot")
			dst := netip.MustParseAddr("198.19.1.1")
			if _, err := us.Handle().RouteGet(net.ParseIP(dst.String())); err != nil {
				t.Fatalf("the kernel no longer routes %v (%v): the test does not test", dst, err)
			}
			followed()
			if nh, _, ok := kr.NextHop(dst); !ok || nh != kV4 {
				out, _ := us.Run("ip", "route")
				t.Fatalf("NextHop(%v) = %v, %v; want %v, true, as the kernel's table:\n%s", dst, nh, ok, kV4, out)
			}
		})
	}
}

// TestSharedRouteTOS: a route with a TOS, which the kernel uses only for
// packets of that TOS, does not answer for the fast path's packets, in
// the follower or in a fresh listing: the kernel's answer for TOS 0 is
// theirs (`ip route get`). Before, a listing answered from a TOS alias
// the kernel lists first, the follower from the route it held, and a
// prefix with TOS routes only answered for everything.
func TestSharedRouteTOS(t *testing.T) {
	us, _, v := sharedPair(t)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	ip := func(args ...string) {
		t.Helper()
		if out, err := us.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("route", "add", "198.19.1.0/24", "via", kV4.String(), "dev", v.A)
	ip("route", "append", "198.19.1.0/24", "tos", "0x10", "via", "198.18.0.3", "dev", v.A)
	ip("route", "add", "198.19.0.0/16", "via", kV4.String(), "dev", v.A)
	ip("route", "add", "198.19.2.0/24", "tos", "0x10", "via", "198.18.0.3", "dev", v.A)
	ip("route", "add", "198.19.3.0/24", "tos", "0x10", "via", "198.18.0.3", "dev", v.A, "metric", "5")
	ip("route", "add", "198.19.3.0/24", "via", kV4.String(), "dev", v.A, "metric", "10")
	fresh, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer fresh.Close()
	for _, d := range []string{"198.19.1.1", "198.19.2.1", "198.19.3.1"} {
		dst := netip.MustParseAddr(d)
		rs, err := us.Handle().RouteGet(net.ParseIP(d))
		if err != nil || len(rs) == 0 {
			t.Fatalf("ip route get %s: %v", d, err)
		}
		want, _ := netip.AddrFromSlice(rs[0].Gw)
		want = want.Unmap()
		if !waitFor(time.Second, func() bool { nh, _, ok := kr.NextHop(dst); return ok && nh == want }) {
			nh, _, ok := kr.NextHop(dst)
			t.Errorf("followed: NextHop(%v) = %v, %v; the kernel routes it via %v", dst, nh, ok, want)
		}
		if nh, _, ok := fresh.NextHop(dst); !ok || nh != want {
			t.Errorf("listed: NextHop(%v) = %v, %v; the kernel routes it via %v", dst, nh, ok, want)
		}
	}
}

// TestSharedRouteOverrunResync: notifications the kernel drops for a full
// socket (ENOBUFS) make the follower subscribe and list again, and the
// changes they carried are in the table.
func TestSharedRouteOverrunResync(t *testing.T) {
	us, _, v := sharedPair(t)
	idx := linkIndex(t, us, v.A)
	// A small socket buffer, and the follower stalled, so that the
	// kernel's notifications overrun it.
	routeRcvbuf = 4096
	// While stall holds a channel, the follower waits for it to close.
	var stall atomic.Pointer[chan struct{}]
	followHook = func() {
		if c := stall.Load(); c != nil {
			<-*c
		}
	}
	defer func() { routeRcvbuf, followHook = neighbourRcvbuf, nil }()
	kr, errs := routesReporting(t, us)
	defer kr.Close()
	fds := openFDs(t)
	gate := make(chan struct{})
	stall.Store(&gate)
	const n = 2000
	for i := range n {
		_, dst, _ := net.ParseCIDR(fmt.Sprintf("198.19.%d.%d/32", i/256, i%256))
		must(t, us.Handle().RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP("198.18.0.2"), LinkIndex: idx}))
	}
	close(gate)
	last := netip.MustParseAddr(fmt.Sprintf("198.19.%d.%d", (n-1)/256, (n-1)%256))
	if !waitFor(3*time.Second, func() bool { _, _, ok := kr.NextHop(last); return ok && kr.Listings.Load() >= 2 }) {
		_, _, ok := kr.NextHop(last)
		t.Fatalf("after the overrun: NextHop(%v) ok = %v, Listings = %d; want a route, and a second listing", last, ok, kr.Listings.Load())
	}
	select {
	case err := <-errs:
		// netlink v1.3.1 wraps a failed receive with %v: the errno
		// is in the text only.
		if !errors.Is(err, syscall.ENOBUFS) && !strings.Contains(err.Error(), syscall.ENOBUFS.Error()) {
			t.Errorf("ErrorCallback got %v, want ENOBUFS", err)
		}
	default:
		t.Errorf("ErrorCallback got nothing, want the overrun")
	}
	for i := range n {
		d := netip.MustParseAddr(fmt.Sprintf("198.19.%d.%d", i/256, i%256))
		if _, _, ok := kr.NextHop(d); !ok {
			t.Fatalf("NextHop(%v) not ok after the resync", d)
		}
	}
	// The failed subscription's sockets are closed, not kept until Close.
	if !waitFor(time.Second, func() bool { return openFDs(t) <= fds }) {
		t.Errorf("%d open files after the resubscription, %d before it", openFDs(t), fds)
	}
}

// TestSharedRoutesRoute: Route gives the kernel's route NextHop follows,
// prefix and metric (the on-link /24, a more specific /28 added later, an
// unreachable route, the lower metric of two of one IPv6 prefix), and
// false where no route covers the destination.
func TestSharedRoutesRoute(t *testing.T) {
	us, _, v := sharedPair(t)
	idx := linkIndex(t, us, v.A)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	bits := func(s string) int {
		r, ok := kr.Route(netip.MustParseAddr(s))
		if !ok {
			return -1
		}
		return r.Prefix.Bits()
	}
	if got := bits("198.18.0.40"); got != 24 {
		t.Errorf("Route(198.18.0.40) prefix /%d, want /24 (on-link)", got)
	}
	if got := bits("203.0.113.1"); got != -1 {
		t.Errorf("Route(uncovered) prefix /%d, want none", got)
	}
	if r, ok := kr.Route(netip.MustParseAddr("2001:2::40")); !ok || r.Metric != 256 {
		t.Errorf("Route(2001:2::40) = %+v, %v; want the kernel's on-link route, metric 256", r, ok)
	}
	_, sub, _ := net.ParseCIDR("198.18.0.32/28")
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: sub, Gw: net.ParseIP(kV4.String()), LinkIndex: idx}))
	_, bh, _ := net.ParseCIDR("198.19.7.0/25")
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: bh, Type: syscall.RTN_UNREACHABLE}))
	_, p6, _ := net.ParseCIDR("2001:2:7::/48")
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: p6, Gw: net.ParseIP(kV6.String()), LinkIndex: idx, Priority: 2000}))
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: p6, Gw: net.ParseIP(kV6.String()), LinkIndex: idx, Priority: 300}))
	if !waitFor(time.Second, func() bool {
		r, ok := kr.Route(netip.MustParseAddr("2001:2:7::1"))
		return bits("198.18.0.40") == 28 && bits("198.19.7.1") == 25 && ok && r.Metric == 300
	}) {
		r, _ := kr.Route(netip.MustParseAddr("2001:2:7::1"))
		t.Errorf("after adding a /28, an unreachable /25 and a /48 of metrics 2000 and 300: /%d, /%d, metric %d; want /28, /25, 300",
			bits("198.18.0.40"), bits("198.19.7.1"), r.Metric)
	}
	if a := testing.AllocsPerRun(100, func() { kr.Route(netip.MustParseAddr("198.18.0.40")) }); a != 0 {
		t.Errorf("Route allocs = %v, want 0", a)
	}
}

// TestSharedRouteMappedPrefix: an IPv6 route to IPv4-mapped addresses
// (::ffff:198.19.9.0/120, which Linux's IPv6 table holds as any other) is
// kept as IPv6, with its IPv6 gateway, and answers for IPv6 packets to
// those addresses (RouteTable.Route), not for IPv4 ones: it was read as
// an IPv4 prefix of 120 bits, an invalid one, and lost.
func TestSharedRouteMappedPrefix(t *testing.T) {
	us, _, v := sharedPair(t)
	idx := linkIndex(t, us, v.A)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	// ip(8): netlink's RouteAdd takes a mapped prefix for IPv4.
	if out, err := us.Run("ip", "-6", "route", "add", "::ffff:198.19.9.0/120", "via", kV6.String(), "dev", v.A); err != nil {
		t.Fatalf("ip -6 route add: %v: %s", err, out)
	}
	mapped := netip.MustParseAddr("::ffff:198.19.9.1")
	want := netip.MustParsePrefix("::ffff:198.19.9.0/120")
	if !waitFor(time.Second, func() bool { r, ok := kr.Table().Route(mapped); return ok && r.Prefix == want }) {
		r, ok := kr.Table().Route(mapped)
		t.Fatalf("Table().Route(%v) = %+v, %v; want %v via %v", mapped, r, ok, want, kV6)
	}
	if r, _ := kr.Table().Route(mapped); r.Gateway != kV6 || r.IfIndex != idx {
		t.Errorf("Table().Route(%v) = %+v; want via %v dev %d", mapped, r, kV6, idx)
	}
	if r, ok := kr.Table().Route(netip.MustParseAddr("198.19.9.1")); ok && r.Prefix.Bits() == 120 {
		t.Errorf("Table().Route(198.19.9.1) = %+v; an IPv4 address follows IPv4 routes", r)
	}
}

// routesReporting follows the routes of us, its ErrorCallback's errors
// (the first 16) in errs.
func routesReporting(t *testing.T, us *topo.NS) (kr *KernelRoutes, errs chan error) {
	t.Helper()
	errs = make(chan error, 16)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle(), ErrorCallback: func(err error) {
		select {
		case errs <- err:
		default:
		}
	}})
	must(t, err)
	return kr, errs
}

// addFollowedRoute adds 198.19.9.0/24 via the k side's IPv4 address out
// of interface idx of us, waits up to a second for kr to follow it, and
// returns an address it routes.
func addFollowedRoute(t *testing.T, us *topo.NS, idx int, kr *KernelRoutes) netip.Addr {
	t.Helper()
	_, n4, _ := net.ParseCIDR("198.19.9.0/24")
	must(t, us.Handle().RouteAdd(&netlink.Route{Dst: n4, Gw: net.ParseIP(kV4.String()), LinkIndex: idx}))
	dst := netip.MustParseAddr("198.19.9.9")
	if !waitFor(time.Second, func() bool { _, _, ok := kr.NextHop(dst); return ok }) {
		t.Fatalf("route to %v not followed", dst)
	}
	return dst
}
