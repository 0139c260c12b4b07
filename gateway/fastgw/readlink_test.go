//go:build linux

package fastgw

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestReadLinkSkipsUnusableIPv6: the IPv6 address the gateway sends from
// (link.v6) is not one still in duplicate address detection (tentative:
// the kernel refuses it as a source, RFC 4862 §5.4) nor deprecated while
// a preferred one exists (RFC 6724 §5 rule 3), though the kernel lists
// the newest address first: an address added to the WAN (a renumbering)
// made the gateway send from it before it could be used. All of them
// are the host's (link.all).
func TestReadLinkSkipsUnusableIPv6(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "rl")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The topology turns duplicate address detection off; on for ours.
	if err := a.Sysctl("net.ipv6.conf."+v.A+".accept_dad", "1"); err != nil {
		t.Fatal(err)
	}
	// ::3 is the peer's already: on ours, duplicate address detection
	// runs (tentative), then fails.
	for _, c := range []struct {
		ns   *topo.NS
		args []string
	}{
		{b, []string{"link", "set", v.B, "up"}},
		{b, []string{"addr", "add", "2001:db8:5::3/64", "dev", v.B, "nodad"}},
		{a, []string{"addr", "add", "2001:db8:5::1/64", "dev", v.A, "nodad"}},
		{a, []string{"addr", "add", "2001:db8:5::2/64", "dev", v.A, "nodad", "preferred_lft", "0"}},
		{a, []string{"addr", "add", "2001:db8:5::3/64", "dev", v.A}},
	} {
		if out, err := c.ns.Run("ip", c.args...); err != nil {
			t.Fatalf("ip %v: %v\n%s", c.args, err, out)
		}
	}
	want := netip.MustParseAddr("2001:db8:5::1")
	l, err := readLink(a.Handle(), v.A)
	if err != nil {
		t.Fatal(err)
	}
	if l.v6 != want {
		out, _ := a.Run("ip", "-6", "addr", "show", "dev", v.A)
		t.Errorf("readLink(%s).v6 = %v, want %v (::3 tentative, ::2 deprecated):\n%s", v.A, l.v6, want, out)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := a.Run("ip", "-6", "addr", "show", "dev", v.A)
		if strings.Contains(out, "dadfailed") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("duplicate address detection of ::3 did not fail:\n%s", out)
		}
	}
	if l, err = readLink(a.Handle(), v.A); err != nil {
		t.Fatal(err)
	}
	if l.v6 != want {
		out, _ := a.Run("ip", "-6", "addr", "show", "dev", v.A)
		t.Errorf("readLink(%s).v6 = %v, want %v (::3 failed detection, ::2 deprecated):\n%s", v.A, l.v6, want, out)
	}
	for _, s := range []string{"2001:db8:5::1", "2001:db8:5::2", "2001:db8:5::3"} {
		found := false
		for _, x := range l.all {
			found = found || x == netip.MustParseAddr(s)
		}
		if !found {
			t.Errorf("readLink(%s).all = %v, want %s in it", v.A, l.all, s)
		}
	}
	// Only a deprecated one usable: it is used.
	a.Run("ip", "addr", "del", "2001:db8:5::1/64", "dev", v.A)
	if l, err = readLink(a.Handle(), v.A); err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("2001:db8:5::2"); l.v6 != want {
		t.Errorf("readLink(%s).v6 = %v with only a deprecated address usable, want %v", v.A, l.v6, want)
	}
}

// TestKernelAddrsNoBroadcasts: owned mode's warning of the addresses the
// kernel keeps on the interfaces lists the host's addresses, not their
// subnets' directed broadcasts (198.18.77.255 of a /24), which link.all
// holds for the host filters, nor IPv6 link-local ones. It listed the
// broadcasts as the host's addresses.
func TestKernelAddrsNoBroadcasts(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "ka")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"addr", "add", "198.18.77.1/24", "brd", "+", "dev", v.A},
		{"addr", "add", "198.18.78.1/30", "dev", v.A}, // broadcast 198.18.78.3 from the kernel's local table only
		{"addr", "add", "2001:db8:77::1/64", "dev", v.A, "nodad"},
		{"link", "set", v.A, "up"}, // its IPv6 link-local address
	} {
		if out, err := a.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	l, err := readLink(a.Handle(), v.A)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"198.18.77.255", "198.18.78.3"} {
		if !slices.Contains(l.all, netip.MustParseAddr(s)) {
			t.Errorf("readLink(%s).all = %v, want the broadcast %s in it (the host's)", v.A, l.all, s)
		}
	}
	got := kernelAddrs(l)
	slices.SortFunc(got, netip.Addr.Compare)
	want := []netip.Addr{netip.MustParseAddr("198.18.77.1"), netip.MustParseAddr("198.18.78.1"), netip.MustParseAddr("2001:db8:77::1")}
	if !slices.Equal(got, want) {
		t.Errorf("kernelAddrs(readLink(%s)) = %v, want %v", v.A, got, want)
	}
}
