//go:build linux

package main

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAddressOverlaps: a tunnel Address whose subnet overlaps another
// interface's (or owned mode's LANAddress) is warned of at the Address
// line, naming both and the overlap; host addresses on either side, and
// subnets apart, are not.
func TestAddressOverlaps(t *testing.T) {
	pf := netip.MustParsePrefix
	others := []ifAddr{
		{dev: "eth1", prefix: pf("198.18.6.1/24")},
		{dev: "eth0", prefix: pf("198.18.5.1/24")},
		{dev: "eth2", prefix: pf("198.18.7.1/32")},
		{dev: "eth1", prefix: pf("2001:db8:6::1/64")},
	}
	lines := map[string]int{"Address": 4}
	for _, tc := range []struct {
		tunnel []netip.Prefix
		want   []string // substrings, one warning each
	}{
		{[]netip.Prefix{pf("198.18.6.1/24")}, []string{`wg0.conf:4: key "Address": 198.18.6.1/24 overlaps the subnet of eth1 (198.18.6.1/24): the kernel has two routes to 198.18.6.0/24, and whenever the tunnel's comes first (after eth1 goes down and up)`}},
		{[]netip.Prefix{pf("198.18.6.200/28")}, []string{`198.18.6.200/28 overlaps the subnet of eth1 (198.18.6.1/24): the kernel has two routes to 198.18.6.192/28`}},
		{[]netip.Prefix{pf("198.18.0.1/16")}, []string{"subnet of eth1", "subnet of eth0"}},
		{[]netip.Prefix{pf("2001:db8:6:0:1::1/80")}, []string{"subnet of eth1 (2001:db8:6::1/64)"}},
		{[]netip.Prefix{pf("198.18.6.9/32"), pf("198.18.7.0/24"), pf("10.8.0.1/24")}, nil},
	} {
		got := addressOverlaps("wg0.conf", lines, tc.tunnel, others)
		if len(got) != len(tc.want) {
			t.Errorf("addressOverlaps(%v) = %v, want %d warnings", tc.tunnel, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i].String(), w) {
				t.Errorf("addressOverlaps(%v)[%d] = %q, want %q in it", tc.tunnel, i, got[i], w)
			}
		}
	}
}
