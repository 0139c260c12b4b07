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

// TestAppendAnycasts: the subnet-router anycast address of every IPv6
// prefix shorter than /127 is added once, link-local's too (fe80::, as
// Linux joins it); a /127, a /128, a prefix of zeros and IPv4 add none.
func TestAppendAnycasts(t *testing.T) {
	addr := func(cidr string) netlink.Addr {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return netlink.Addr{IPNet: n}
	}
	addrs := []netlink.Addr{
		addr("2001:db8:1::1/64"),
		addr("2001:db8:1::2/64"), // a second address: the same anycast
		addr("2001:db8:2::1/127"),
		addr("2001:db8:3::1/128"),
		addr("2001:db8:4:5ff:6::1/56"),
		addr("fe80::1234/64"),
		addr("::1/0"),
		addr("198.19.1.1/24"),
	}
	all := []netip.Addr{netip.MustParseAddr("2001:db8:1::1")}
	got := AppendAnycasts(all, addrs)
	want := []netip.Addr{
		netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("2001:db8:1::"),
		netip.MustParseAddr("2001:db8:4:500::"), netip.MustParseAddr("fe80::"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("AppendAnycasts = %v, want %v", got, want)
	}
}
