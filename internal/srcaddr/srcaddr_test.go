//go:build linux

package srcaddr

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestChoose: the first IPv4 address; the first preferred IPv6 address
// that is not link-local, though tentative, failed and deprecated ones
// come before it (the kernel lists the newest first); a deprecated one
// when no other is left; every address in all. The kernel's own flags
// on real addresses: fastgw's TestReadLinkSkipsUnusableIPv6.
func TestChoose(t *testing.T) {
	addr := func(s string, flags int) netlink.Addr {
		return netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(s)}, Flags: flags}
	}
	addrs := []netlink.Addr{
		addr("2001:db8::4", unix.IFA_F_TENTATIVE),
		addr("2001:db8::3", unix.IFA_F_DADFAILED|unix.IFA_F_TENTATIVE),
		addr("2001:db8::2", unix.IFA_F_DEPRECATED),
		addr("fe80::1", 0),
		addr("198.18.0.1", 0),
		addr("2001:db8::1", 0),
		addr("198.18.0.2", 0),
	}
	v4, v6, all := Choose(addrs)
	if v4 != netip.MustParseAddr("198.18.0.1") || v6 != netip.MustParseAddr("2001:db8::1") || len(all) != len(addrs) {
		t.Errorf("Choose = %v, %v, %v; want 198.18.0.1, 2001:db8::1 and all %d", v4, v6, all, len(addrs))
	}
	if !slices.Contains(all, netip.MustParseAddr("198.18.0.1")) {
		t.Errorf("all = %v: an IPv4 address as IPv6-mapped?", all)
	}
	if _, v6, _ := Choose(slices.Delete(slices.Clone(addrs), 5, 6)); v6 != netip.MustParseAddr("2001:db8::2") {
		t.Errorf("without a preferred address: v6 = %v, want the deprecated 2001:db8::2", v6)
	}
	if _, v6, _ := Choose(addrs[:2]); v6.IsValid() {
		t.Errorf("tentative and failed addresses only: v6 = %v, want none", v6)
	}
}

// TestLinkLocal: the first preferred link-local address, though
// tentative, failed and deprecated ones come before it; a deprecated one
// when no other is left; none among global and IPv4 addresses alone.
func TestLinkLocal(t *testing.T) {
	addr := func(s string, flags int) netlink.Addr {
		return netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(s)}, Flags: flags}
	}
	addrs := []netlink.Addr{
		addr("2001:db8::1", 0),
		addr("198.18.0.1", 0),
		addr("fe80::4", unix.IFA_F_TENTATIVE),
		addr("fe80::3", unix.IFA_F_DADFAILED|unix.IFA_F_TENTATIVE),
		addr("fe80::2", unix.IFA_F_DEPRECATED),
		addr("fe80::1", 0),
	}
	if got := LinkLocal(addrs); got != netip.MustParseAddr("fe80::1") {
		t.Errorf("LinkLocal = %v, want fe80::1", got)
	}
	if got := LinkLocal(addrs[:5]); got != netip.MustParseAddr("fe80::2") {
		t.Errorf("without a preferred one: LinkLocal = %v, want the deprecated fe80::2", got)
	}
	if got := LinkLocal(addrs[:2]); got.IsValid() {
		t.Errorf("no link-local address: LinkLocal = %v, want none", got)
	}
}

// TestOthers: every address but the two chosen, link-local and unusable
// IPv6 ones, each once, in order; past the bound (the chosen one counted)
// in left.
func TestOthers(t *testing.T) {
	addr := func(s string, flags int) netlink.Addr {
		return netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(s)}, Flags: flags}
	}
	addrs := []netlink.Addr{
		addr("198.18.0.1", 0),
		addr("2001:db8::4", unix.IFA_F_TENTATIVE),
		addr("fe80::1", 0),
		addr("198.18.0.100", 0),
		addr("2001:db8::1", 0),
		addr("2001:db8::2", unix.IFA_F_DEPRECATED),
		addr("198.18.0.100", 0),
		addr("198.18.0.101", 0),
	}
	v4, v6, _ := Choose(addrs)
	mk := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	others, left := Others(addrs, v4, v6, 256)
	if want := mk("198.18.0.100", "2001:db8::2", "198.18.0.101"); !slices.Equal(others, want) || left != nil {
		t.Errorf("Others = %v, %v; want %v, none left", others, left, want)
	}
	others, left = Others(addrs, v4, v6, 2)
	if want, wantLeft := mk("198.18.0.100", "2001:db8::2"), mk("198.18.0.101"); !slices.Equal(others, want) || !slices.Equal(left, wantLeft) {
		t.Errorf("Others(max 2) = %v, %v; want %v, %v left", others, left, want, wantLeft)
	}
}

// TestSubnets: every IPv4 address and every preferred global IPv6 one,
// with its prefix length, in the order netlink lists them; no
// link-local, tentative, failed or deprecated address.
func TestSubnets(t *testing.T) {
	addr := func(s string, flags int) netlink.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return netlink.Addr{IPNet: n, Flags: flags}
	}
	got := Subnets([]netlink.Addr{
		addr("2001:db8:7::1/64", 0),
		addr("198.18.7.1/24", 0),
		addr("2001:db8::4/64", unix.IFA_F_TENTATIVE),
		addr("2001:db8::2/64", unix.IFA_F_DEPRECATED),
		addr("fe80::1/64", 0),
		addr("198.18.0.1/16", 0),
		{}, // no address: skipped
	})
	want := []netip.Prefix{netip.MustParsePrefix("2001:db8:7::1/64"), netip.MustParsePrefix("198.18.7.1/24"), netip.MustParsePrefix("198.18.0.1/16")}
	if !slices.Equal(got, want) {
		t.Errorf("Subnets = %v, want %v", got, want)
	}
}
