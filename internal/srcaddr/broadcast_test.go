//go:build linux

package srcaddr

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestAppendBroadcasts: the directed broadcast of every IPv4 prefix
// shorter than /31 and every explicit broadcast address are added once;
// a /31, a /32, IPv6 and 255.255.255.255 add none.
func TestAppendBroadcasts(t *testing.T) {
	addr := func(cidr, brd string) netlink.Addr {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		a := netlink.Addr{IPNet: n}
		if brd != "" {
			a.Broadcast = net.ParseIP(brd)
		}
		return a
	}
	addrs := []netlink.Addr{
		addr("198.19.1.1/24", ""),
		addr("198.19.1.2/24", "198.19.1.255"), // a second address: the same broadcast
		addr("198.18.5.1/31", ""),
		addr("198.18.6.1/32", ""),
		addr("198.18.7.1/30", "198.18.7.255"), // an explicit brd beside the prefix's
		addr("10.0.0.1/8", "255.255.255.255"),
		addr("2001:db8::1/64", ""),
	}
	all := []netip.Addr{netip.MustParseAddr("198.19.1.1")}
	got := AppendBroadcasts(all, addrs)
	want := []netip.Addr{
		netip.MustParseAddr("198.19.1.1"), netip.MustParseAddr("198.19.1.255"),
		netip.MustParseAddr("198.18.7.255"), netip.MustParseAddr("198.18.7.3"),
		netip.MustParseAddr("10.255.255.255"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("AppendBroadcasts = %v, want %v", got, want)
	}
}
