package arp

import (
	"net/netip"
	"testing"
)

func TestStaticRoutes(t *testing.T) {
	s, err := NewStaticRoutes([]Route{
		{Prefix: netip.MustParsePrefix("198.18.0.0/24"), IfIndex: 2},
		{Prefix: netip.MustParsePrefix("198.18.0.0/16"), Gateway: netip.MustParseAddr("198.18.0.254"), IfIndex: 2},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.0.1"), IfIndex: 2},
		{Prefix: netip.MustParsePrefix("2001:2::/64"), IfIndex: 3},
		{Prefix: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("2001:2::1"), IfIndex: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dst, want string
		ifindex   int
		ok        bool
	}{
		{"198.18.0.7", "198.18.0.7", 2, true},        // on-link
		{"198.18.5.1", "198.18.0.254", 2, true},      // longer prefix via its gateway
		{"203.0.113.9", "198.18.0.1", 2, true},       // default route
		{"::ffff:198.18.0.7", "198.18.0.7", 2, true}, // IPv4-mapped
		{"2001:2::9", "2001:2::9", 3, true},
		{"2001:db8::1", "2001:2::1", 3, true},
	}
	for _, tt := range tests {
		nh, idx, ok := s.NextHop(netip.MustParseAddr(tt.dst))
		if ok != tt.ok || idx != tt.ifindex || (ok && nh != netip.MustParseAddr(tt.want)) {
			t.Errorf("NextHop(%s) = %v, %d, %v, want %s, %d, %v", tt.dst, nh, idx, ok, tt.want, tt.ifindex, tt.ok)
		}
	}
	noDefault, _ := NewStaticRoutes([]Route{{Prefix: netip.MustParsePrefix("198.18.0.0/24"), IfIndex: 2}})
	if _, _, ok := noDefault.NextHop(netip.MustParseAddr("198.19.0.1")); ok {
		t.Errorf("NextHop(uncovered) ok = true, want false")
	}
	if _, err := NewStaticRoutes([]Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.0.1")}}); err == nil {
		t.Errorf("NewStaticRoutes(gateway not on-link) error = nil, want an error")
	}
	if _, err := NewStaticRoutes([]Route{{Prefix: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("198.18.0.1")}}); err == nil {
		t.Errorf("NewStaticRoutes(gateway of another family) error = nil, want an error")
	}
	if a := testing.AllocsPerRun(100, func() { s.NextHop(netip.MustParseAddr("198.18.5.1")) }); a != 0 {
		t.Errorf("NextHop allocs = %v, want 0", a)
	}
	for _, tt := range []struct {
		dst  string
		want string
	}{
		{"198.18.0.7", "198.18.0.0/24"}, {"198.18.5.1", "198.18.0.0/16"}, {"203.0.113.9", "0.0.0.0/0"},
		{"::ffff:198.18.0.7", "198.18.0.0/24"}, {"2001:2::9", "2001:2::/64"}, {"2001:db8::1", "::/0"},
	} {
		if r, ok := s.Route(netip.MustParseAddr(tt.dst)); !ok || r.Prefix != netip.MustParsePrefix(tt.want) {
			t.Errorf("Route(%s) = %v, %v; want %s, true", tt.dst, r.Prefix, ok, tt.want)
		}
	}
	if r, ok := noDefault.Route(netip.MustParseAddr("198.19.0.1")); ok {
		t.Errorf("Route(uncovered) = %v, true; want false", r)
	}
	if a := testing.AllocsPerRun(100, func() { s.Route(netip.MustParseAddr("198.18.5.1")) }); a != 0 {
		t.Errorf("Route allocs = %v, want 0", a)
	}
}
