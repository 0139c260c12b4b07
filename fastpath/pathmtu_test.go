package fastpath

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestPathMTUFragments: a path MTU learnt toward an IPv6 endpoint
// (SetPathMTU, from a router's "packet too big") below the WAN MTU makes
// the full-size outer packets toward it leave as IPv6 fragments within it,
// which B reassembles and delivers, as Linux's WireGuard sends them once
// its kernel learnt the path MTU. Before, they left whole at the WAN MTU
// and the router dropped every one (IPv6 routers do not fragment): with
// IPv6 endpoints and the default tunnel MTU (1,500-byte outer packets),
// a peer behind a 1,400-byte link got no full-size packet at all. An
// endpoint's path MTU applies to it alone, and forgetting it (0) sends
// whole packets again.
func TestPathMTUFragments(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true})
	r.a.SetWANMTU(1500)
	sizes := []int{100, 1420 - 28, 200, 1420 - 28}
	run := func(wantFrags int) {
		t.Helper()
		limit := 1500
		if wantFrags > 1 {
			limit = 1400
		}
		sendFragmented(t, r, sizes, wantFrags, limit)
	}
	// Another endpoint's path MTU changes nothing toward B.
	if !r.a.SetPathMTU(netip.MustParseAddr("2001:db8:ffff::1"), 1280) {
		t.Fatal("SetPathMTU refused")
	}
	run(1)
	if !r.a.SetPathMTU(wan6B, 1400) {
		t.Fatal("SetPathMTU refused")
	}
	run(2)
	if s := r.a.Stats()[0]; s.OuterFragmented != 2 {
		t.Errorf("outer_fragmented %d, want 2", s.OuterFragmented)
	}
	r.a.SetPathMTU(wan6B, 0)
	run(1)
	if got := r.a.PathMTUs(); len(got) != 1 || got[netip.MustParseAddr("2001:db8:ffff::1")] != 1280 {
		t.Errorf("PathMTUs %v, want only 2001:db8:ffff::1 at 1280", got)
	}
	if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
		t.Errorf("drops: A %v", d.List())
	}
}

// TestSetPathMTUBounds: below 1,280 is taken as 1,280 (RFC 8201 §4), IPv4
// is ignored, and the table holds MaxPathMTUs endpoints, a new one past
// that refused while known ones still change.
func TestSetPathMTUBounds(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true})
	r.a.SetPathMTU(wan6B, 600)
	r.a.SetPathMTU(netip.MustParseAddr("198.18.0.9"), 600)
	if got := r.a.PathMTUs(); len(got) != 1 || got[wan6B] != 1280 {
		t.Fatalf("PathMTUs %v, want %v at 1280 alone", got, wan6B)
	}
	for i := 1; i < MaxPathMTUs; i++ {
		if !r.a.SetPathMTU(netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x", i)), 1400) {
			t.Fatalf("endpoint %d refused", i)
		}
	}
	if r.a.SetPathMTU(netip.MustParseAddr("2001:db8:2::1"), 1400) {
		t.Error("a new endpoint past MaxPathMTUs taken")
	}
	if !r.a.SetPathMTU(wan6B, 1300) || r.a.PathMTUs()[wan6B] != 1300 {
		t.Error("a known endpoint's path MTU not changed at MaxPathMTUs")
	}
}
