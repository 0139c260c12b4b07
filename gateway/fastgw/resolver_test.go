//go:build linux

package fastgw

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestResolverPrefixLen: the LAN resolver tells the fast path the length
// of its route toward a destination and whether Linux would prefer it to
// a route of the same prefix into the exception TUN (fastpath.RouteLengths,
// peer to peer): a kernel IPv6 route of a metric below 1024 (the on-link
// /64, 256), not one above, no IPv4 route, no static route; and whether
// the route leads off the LAN (full tunnels: the fast path hands such
// packets to the host's kernel): a kernel route out of another interface
// or a blackhole does, and no kernel route at all (the kernel's ip rules
// may pick another table), the LAN's own do not, a static route never
// does.
func TestResolverPrefixLen(t *testing.T) {
	static, err := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), IfIndex: 2}})
	if err != nil {
		t.Fatal(err)
	}
	owned := &resolver{routes: static}
	if bits, first, off := owned.PrefixLen(netip.MustParseAddr("2001:db8:1::5")); bits != 64 || first || off {
		t.Errorf("owned PrefixLen = %d, %v, %v; want 64, false, false", bits, first, off)
	}
	if bits, _, off := owned.PrefixLen(netip.MustParseAddr("2001:db8:2::5")); bits != -1 || off {
		t.Errorf("owned PrefixLen(uncovered) = %d, offLAN %v; want -1, false", bits, off)
	}

	tp := testenv.Topology(t, "rs")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"198.19.1.1/24", "2001:db8:1::1/64"} {
		if err := a.AddAddr(v.A, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.AddRoute("2001:db8:7::/48", "", v.A); err != nil { // metric 1024
		t.Fatal(err)
	}
	for _, r := range [][]string{{"198.19.5.0/24", "dev", v.A, "metric", "100"}, {"2001:db8:5::/48", "dev", v.A, "metric", "2048"}} {
		if out, err := a.Run("ip", append([]string{"route", "add"}, r...)...); err != nil {
			t.Fatalf("ip route add %v: %v\n%s", r, err, out)
		}
	}
	// Another interface (a WAN) with the default route, and a blackhole.
	w, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr(w.A, "198.18.9.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddRoute("0.0.0.0/0", "198.18.9.2", w.A); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run("ip", "route", "add", "blackhole", "198.19.6.0/24"); err != nil {
		t.Fatalf("ip route add blackhole: %v\n%s", err, out)
	}
	lan, err := a.Handle().LinkByName(v.A)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := arp.NewKernelRoutes(arp.KernelOptions{Namespace: a.NsHandle()})
	if err != nil {
		t.Fatal(err)
	}
	defer kr.Close()
	shared := &resolver{routes: kr, ifindex: lan.Attrs().Index}
	for _, c := range []struct {
		dst        string
		bits       int
		first, off bool
	}{
		// Of our route's key (IPv4 metric 0, IPv6 1024) or a lower
		// metric: the host's, which keeps the key (dataplane_.route),
		// first; of a higher metric, after ours.
		{"2001:db8:1::5", 64, true, false}, {"2001:db8:7::5", 48, true, false}, {"198.19.1.5", 24, true, false},
		{"2001:db8:9::5", -1, false, true}, {"198.19.9.5", 0, true, true}, {"198.18.9.7", 24, true, true},
		{"198.19.6.5", 24, true, true}, {"198.19.5.5", 24, false, false}, {"2001:db8:5::5", 48, false, false},
	} {
		var bits int
		var first, off bool
		// The routes are read by KernelRoutes' own goroutine: up to 10 s
		// on a loaded machine.
		deadline := time.Now().Add(10 * time.Second)
		for {
			bits, first, off = shared.PrefixLen(netip.MustParseAddr(c.dst))
			if bits == c.bits && first == c.first && off == c.off || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if bits != c.bits || first != c.first || off != c.off {
			t.Errorf("shared PrefixLen(%s) = %d, %v, %v; want %d, %v, %v", c.dst, bits, first, off, c.bits, c.first, c.off)
		}
	}
	// A multipath route over the LAN and the WAN, 1:255: a destination
	// is off the LAN when the next hop it hashes to is (Route.Path, as
	// the LAN's Resolve answers), not by the first next hop (the LAN's).
	if out, err := a.Run("ip", "route", "add", "198.19.8.0/24", "nexthop", "via", "198.19.1.2", "dev", v.A, "weight", "1",
		"nexthop", "via", "198.18.9.2", "dev", w.A, "weight", "255"); err != nil {
		t.Fatalf("ip route add multipath: %v\n%s", err, out)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { r, _ := kr.Route(netip.MustParseAddr("198.19.8.1")); return len(r.Paths()) == 2 }) {
		t.Fatal("the multipath route not followed")
	}
	offs := 0
	for i := 1; i <= 32; i++ {
		d := netip.AddrFrom4([4]byte{198, 19, 8, byte(i)})
		r, _ := kr.Route(d)
		_, ifindex := r.Path(d)
		if _, _, off := shared.PrefixLen(d); off != (ifindex != lan.Attrs().Index) {
			t.Errorf("PrefixLen(%v) offLAN %v, its next hop out of interface %d (the LAN is %d)", d, off, ifindex, lan.Attrs().Index)
		} else if off {
			offs++
		}
	}
	if offs == 0 {
		t.Error("no destination of 32 off the LAN, at 255 to 1")
	}
}

// TestResolverHasRoute: the WAN resolver has a route toward an address
// its routes cover out of its interface (fastpath.WANRoutes, which tells
// no_wan_route from no_neighbour), none toward one they do not cover or
// that leaves by another interface.
func TestResolverHasRoute(t *testing.T) {
	static, err := arp.NewStaticRoutes([]arp.Route{
		{Prefix: netip.MustParsePrefix("198.18.0.0/24")},
		{Prefix: netip.MustParsePrefix("198.18.9.0/24"), IfIndex: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &resolver{routes: static, ifindex: 3}
	for _, tc := range []struct {
		dst  string
		want bool
	}{{"198.18.0.5", true}, {"198.19.0.1", false}, {"198.18.9.1", false}} {
		if got := r.HasRoute(netip.MustParseAddr(tc.dst)); got != tc.want {
			t.Errorf("HasRoute(%s) = %v, want %v", tc.dst, got, tc.want)
		}
	}
}
