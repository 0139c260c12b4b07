//go:build linux

package fastgw

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
)

// TestLeastMTU: the least tunnel MTU the MTU warnings may offer is the
// fast path's (576), or IPv6's minimum (1280) with an IPv6 WAN address
// (fastpath.New refuses less) or an IPv6 tunnel Address (the
// configuration refuses less). The warning at a WAN MTU of 1300 with IPv6
// endpoints offered 1220.
func TestLeastMTU(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tt := range []struct {
		name  string
		addrs []netip.Prefix
		v6    bool
		want  int
	}{
		{"ipv4 only", []netip.Prefix{p("198.18.100.1/24")}, false, fastpath.MinMTU},
		{"no address", nil, false, fastpath.MinMTU},
		{"ipv6 wan", []netip.Prefix{p("198.18.100.1/24")}, true, 1280},
		{"ipv6 tunnel address", []netip.Prefix{p("198.18.100.1/24"), p("2001:db8:100::1/64")}, false, 1280},
	} {
		if got := (Config{Addresses: tt.addrs}).leastMTU(tt.v6); got != tt.want {
			t.Errorf("%s: leastMTU = %d, want %d", tt.name, got, tt.want)
		}
	}
}
