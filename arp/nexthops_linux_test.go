package arp

import (
	"net/netip"
	"testing"
	"time"
)

// TestSharedRouteNexthopObjects: routes through nexthop objects (`ip route
// add ... nhid N`) and multipath routes are followed when the route or
// its nexthop changes or goes.
func TestSharedRouteNexthopObjects(t *testing.T) {
	us, _, v := sharedPair(t)
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()
	run := func(args ...string) {
		t.Helper()
		if out, err := us.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
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
	expect("route through group 4", dst7, kV4, true)
	run("nexthop", "del", "id", "2")
	expect("group 4 without nexthop 2", dst7, gw2, true)
	run("nexthop", "del", "id", "3")
	expect("group 4 emptied", dst7, netip.Addr{}, false)

	dst8 := netip.MustParseAddr("198.19.8.8")
	run("route", "add", "198.19.8.0/24", "nexthop", "via", kV4.String(), "dev", v.A, "nexthop", "via", gw2.String(), "dev", v.A)
	expect("multipath route", dst8, kV4, true)
	run("route", "del", "198.19.8.0/24")
	expect("multipath route deleted", dst8, netip.Addr{}, false)
	t.Logf("listings %d", kr.Listings.Load())
}
