package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestReadIfaceSkipsUnusableIPv6: the IPv6 address compat mode's bind
// sends from (iface.v6) is not one still in duplicate address detection
// or that failed it, nor a deprecated one while a preferred one exists
// (package srcaddr), as in fastgw's TestReadLinkSkipsUnusableIPv6.
func TestReadIfaceSkipsUnusableIPv6(t *testing.T) {
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
	l, err := readIface(a.Handle(), v.A)
	if err != nil {
		t.Fatal(err)
	}
	if l.v6 != want {
		out, _ := a.Run("ip", "-6", "addr", "show", "dev", v.A)
		t.Errorf("readIface(%s).v6 = %v, want %v (::3 tentative, ::2 deprecated):\n%s", v.A, l.v6, want, out)
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
	if l, err = readIface(a.Handle(), v.A); err != nil {
		t.Fatal(err)
	}
	if l.v6 != want {
		out, _ := a.Run("ip", "-6", "addr", "show", "dev", v.A)
		t.Errorf("readIface(%s).v6 = %v, want %v (::3 failed detection, ::2 deprecated):\n%s", v.A, l.v6, want, out)
	}
	// Only a deprecated one usable: it is used.
	a.Run("ip", "addr", "del", "2001:db8:5::1/64", "dev", v.A)
	if l, err = readIface(a.Handle(), v.A); err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("2001:db8:5::2"); l.v6 != want {
		t.Errorf("readIface(%s).v6 = %v with only a deprecated address usable, want %v", v.A, l.v6, want)
	}
}
