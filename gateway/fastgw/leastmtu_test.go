//go:build linux

package fastgw

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
)

// TestLeastMTU: the least tunnel MTU the MTU warnings may offer is the
// fast path's (576), with an IPv6 WAN address too (as Linux's wg0 takes
// it: the outer family bounds nothing inside; it was 1280 there, and a
// WAN MTU of 1300 with IPv6 endpoints was told no tunnel MTU fits), or
// IPv6's minimum (1280) with an IPv6 tunnel Address (the configuration
// refuses less).
func TestLeastMTU(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tt := range []struct {
		name  string
		addrs []netip.Prefix
		want  int
	}{
		{"ipv4 only", []netip.Prefix{p("198.18.100.1/24")}, fastpath.MinMTU},
		{"no address", nil, fastpath.MinMTU},
		{"ipv6 tunnel address", []netip.Prefix{p("198.18.100.1/24"), p("2001:db8:100::1/64")}, 1280},
	} {
		if got := (&Config{Addresses: tt.addrs}).leastMTU(); got != tt.want {
			t.Errorf("%s: leastMTU = %d, want %d", tt.name, got, tt.want)
		}
	}
	// IPv6 endpoints over a WAN MTU of 1300: 1220 is offered (it said
	// no tunnel MTU fits, the least being 1280).
	w := tunnelmtu.CheckWAN(1420, 1300, "wan0", 0, false, true, (&Config{}).wanLimits())
	if !strings.Contains(w, "lower MTU in [Interface] to 1220") {
		t.Errorf("IPv6 WAN MTU 1300: CheckWAN = %q, want it to offer 1220", w)
	}
}
