package arp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestSharedRouteNexthopObjects: routes through nexthop objects (`ip route
// add ... nhid N`) and multipath routes are followed when the route or
// its nexthop changes or goes, and a multipath route's destinations
// spread over its next hops.
func TestSharedRouteNexthopObjects(t *testing.T) {
	us, _, v := sharedPair(t)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	run := func(args ...string) { t.Helper(); ipIn(t, us, args...) }
	expect := func(what string, dst netip.Addr, want netip.Addr, wantOK bool) {
		t.Helper()
		if !waitFor(time.Second, func() bool {
			nh, _, ok := kr.NextHop(dst)
			return ok == wantOK && (!ok || nh == want)
		}) {
			nh, i, ok := kr.NextHop(dst)
			r, _ := us.Run("ip", "route", "get", dst.String())
			t.Errorf("%s: NextHop(%v) = %v, %d, %v; want %v, %v (kernel: %s)", what, dst, nh, i, ok, want, wantOK, r)
		}
	}
	// expectPaths: dst's route is a multipath route over next hops
	// want, and NextHop answers the one of them the route picks for dst.
	expectPaths := func(what string, dst netip.Addr, want ...netip.Addr) {
		t.Helper()
		var got []Path
		if !waitFor(time.Second, func() bool {
			r, ok := kr.Route(dst)
			got = r.Paths()
			return ok && len(got) == len(want)
		}) {
			t.Fatalf("%s: paths %+v, want next hops %v", what, got, want)
		}
		for i, p := range got {
			if p.Gateway != want[i] || p.Weight != 1 {
				t.Errorf("%s: path %d %+v, want via %v weight 1", what, i, p, want[i])
			}
		}
		r, _ := kr.Route(dst)
		pick, _ := r.Path(dst)
		if nh, _, ok := kr.NextHop(dst); !ok || nh != pick {
			t.Errorf("%s: NextHop(%v) = %v, %v; the route picks %v", what, dst, nh, ok, pick)
		}
	}
	dst := netip.MustParseAddr("198.19.9.9")
	gw2 := netip.MustParseAddr("198.18.0.3")
	run("nexthop", "add", "id", "1", "via", kV4.String(), "dev", v.A)
	run("route", "add", "198.19.9.0/24", "nhid", "1")
	expect("route through nexthop 1", dst, kV4, true)
	run("nexthop", "replace", "id", "1", "via", gw2.String(), "dev", v.A)
	expect("nexthop 1 replaced", dst, gw2, true)
	run("nexthop", "del", "id", "1")
	expect("nexthop 1 deleted", dst, netip.Addr{}, false)

	dst7 := netip.MustParseAddr("198.19.7.7")
	run("nexthop", "add", "id", "2", "via", kV4.String(), "dev", v.A)
	run("nexthop", "add", "id", "3", "via", gw2.String(), "dev", v.A)
	run("nexthop", "add", "id", "4", "group", "2/3")
	run("route", "add", "198.19.7.0/24", "nhid", "4")
	expectPaths("route through group 4", dst7, kV4, gw2)
	run("nexthop", "del", "id", "2")
	expect("group 4 without nexthop 2", dst7, gw2, true)
	run("nexthop", "del", "id", "3")
	expect("group 4 emptied", dst7, netip.Addr{}, false)

	dst8 := netip.MustParseAddr("198.19.8.8")
	run("route", "add", "198.19.8.0/24", "nexthop", "via", kV4.String(), "dev", v.A, "nexthop", "via", gw2.String(), "dev", v.A)
	expectPaths("multipath route", dst8, kV4, gw2)
	// The destinations of the route spread over both next hops (all 64
	// by one: 2^-63 by chance).
	by := map[netip.Addr]int{}
	d := netip.MustParseAddr("198.19.8.1")
	for range 64 {
		nh, _, _ := kr.NextHop(d)
		by[nh]++
		d = d.Next()
	}
	if by[kV4] == 0 || by[gw2] == 0 || by[kV4]+by[gw2] != 64 {
		t.Errorf("64 destinations of a multipath route by next hop: %v", by)
	}
	run("route", "del", "198.19.8.0/24")
	expect("multipath route deleted", dst8, netip.Addr{}, false)

	// IPv6: a route of the same prefix and metric appended through
	// another gateway is a next hop more of one multipath route
	// (rt6_qualify_for_ecmp: not learnt from an RA).
	dst6 := netip.MustParseAddr("2001:2:99::9")
	ll1, ll2 := netip.MustParseAddr("fe80::a1"), netip.MustParseAddr("fe80::a2")
	run("-6", "route", "add", "2001:2:99::/64", "via", ll1.String(), "dev", v.A)
	expect("IPv6 route", dst6, ll1, true)
	run("-6", "route", "append", "2001:2:99::/64", "via", ll2.String(), "dev", v.A)
	expectPaths("IPv6 route appended", dst6, ll1, ll2)
	run("-6", "route", "del", "2001:2:99::/64", "via", ll1.String(), "dev", v.A)
	expect("IPv6 next hop deleted", dst6, ll2, true)
	t.Logf("listings %d", kr.Listings.Load())
}

// TestSharedMultipathLinkBack: a multipath route's next hop whose link
// goes down leaves the route's next hops (RTNH_F_DEAD), and comes back
// when the link comes up, as the kernel's own lookups spread over both
// again: the kernel notifies no route for either (fib_sync_down_dev,
// fib_sync_up), the follower lists the table at the link's changes.
// Before, the next hop stayed out after its link came back (a reviewer's
// namespace: 15 s later, no listing).
func TestSharedMultipathLinkBack(t *testing.T) {
	us, _, v := sharedPair(t)
	tp := testenv.Topology(t, "arpm")
	k2 := testenv.NS(t, tp, "k2")
	v2, err := tp.NewVeth(us, k2, topo.VethConfig{})
	must(t, err)
	// No IPv6 on it: its link-local route, made again when the link
	// comes up, would share a key with the first link's and make the
	// follower list the table anyway.
	must(t, us.Sysctl("net.ipv6.conf."+v2.A+".disable_ipv6", "1"))
	must(t, us.AddAddr(v2.A, "198.18.7.1/24"))
	must(t, k2.AddAddr(v2.B, "198.18.7.2/24"))
	waitUp(t, v2)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	run := func(args ...string) { t.Helper(); ipIn(t, us, args...) }
	dst := netip.MustParseAddr("198.19.5.5")
	paths := func() int {
		r, ok := kr.Route(dst)
		if !ok {
			return 0
		}
		if p := r.Paths(); p != nil {
			return len(p)
		}
		return 1
	}
	run("route", "add", "198.19.5.0/24", "nexthop", "via", kV4.String(), "dev", v.A, "nexthop", "via", "198.18.7.2", "dev", v2.A)
	if !waitFor(2*time.Second, func() bool { return paths() == 2 }) {
		t.Fatalf("multipath route: %d next hops, want 2", paths())
	}
	run("link", "set", v2.A, "down")
	if !waitFor(2*time.Second, func() bool { return paths() == 1 }) {
		t.Fatalf("link of the second next hop down: %d next hops, want 1", paths())
	}
	run("link", "set", v2.A, "up")
	if !waitFor(3*time.Second, func() bool { return paths() == 2 }) {
		out, _ := us.Run("ip", "route", "show", "198.19.5.0/24")
		t.Fatalf("link back up: %d next hops, want 2 (kernel: %s)", paths(), out)
	}
}

// ipIn runs `ip ARGS...` in ns, failing the test if it fails.
func ipIn(t *testing.T, ns *topo.NS, args ...string) {
	t.Helper()
	if out, err := ns.Run("ip", args...); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}
