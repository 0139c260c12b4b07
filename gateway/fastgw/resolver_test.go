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
// /64, 256), not one above, no IPv4 route, no static route.
func TestResolverPrefixLen(t *testing.T) {
	static, err := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), IfIndex: 2}})
	if err != nil {
		t.Fatal(err)
	}
	owned := &resolver{routes: static}
	if bits, first := owned.PrefixLen(netip.MustParseAddr("2001:db8:1::5")); bits != 64 || first {
		t.Errorf("owned PrefixLen = %d, %v; want 64, false", bits, first)
	}
	if bits, _ := owned.PrefixLen(netip.MustParseAddr("2001:db8:2::5")); bits != -1 {
		t.Errorf("owned PrefixLen(uncovered) = %d, want -1", bits)
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
	kr, err := arp.NewKernelRoutes(arp.KernelOptions{Namespace: a.NsHandle()})
	if err != nil {
		t.Fatal(err)
	}
	defer kr.Close()
	shared := &resolver{routes: kr}
	for _, c := range []struct {
		dst   string
		bits  int
		first bool
	}{
		{"2001:db8:1::5", 64, true}, {"2001:db8:7::5", 48, false}, {"198.19.1.5", 24, false}, {"198.19.9.5", -1, false},
	} {
		var bits int
		var first bool
		deadline := time.Now().Add(time.Second)
		for {
			bits, first = shared.PrefixLen(netip.MustParseAddr(c.dst))
			if bits == c.bits && first == c.first || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if bits != c.bits || first != c.first {
			t.Errorf("shared PrefixLen(%s) = %d, %v; want %d, %v", c.dst, bits, first, c.bits, c.first)
		}
	}
}
