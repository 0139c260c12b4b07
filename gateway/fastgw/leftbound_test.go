//go:build linux

package fastgw

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// churnPrefixes adds a peer with each prefix and removes it, one change
// each, as `wg set` does in scripts/soak.sh's churn.
func churnPrefixes(t *testing.T, d *dataplane_, prefixes ...string) {
	t.Helper()
	for _, s := range prefixes {
		p := &fastpath.Peer{}
		r := fastpath.Route{Prefix: netip.MustParsePrefix(s), Peer: p}
		if err := d.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{p}, Routes: []fastpath.Route{r}}); err != nil {
			t.Fatal(err)
		}
		r.Peer = nil
		if err := d.UpdatePeers(fastpath.PeerChange{Remove: []*fastpath.Peer{p}, Routes: []fastpath.Route{r}}); err != nil {
			t.Fatal(err)
		}
	}
	d.WaitApplied() // the route worker's adds and deletes, in order
}

func testEngine(t *testing.T) *fastpath.Engine {
	t.Helper()
	a, b, err := memport.NewPair(memport.Config{Name: "lb", MACA: net.HardwareAddr{2, 0, 0, 0, 10, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 10, 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	eng, err := fastpath.New(fastpath.Config{LAN: a, WAN: b, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
		WANResolver: anyMAC{}, LANResolver: anyMAC{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// TestLeftPrefixesNoExceptionTUN: without an exception TUN no route is
// kept for a prefix that leaves the configuration, so none is recorded.
// Before, every prefix that ever left stayed in a map nothing read: a
// gateway without Address whose peers came and went with new addresses
// grew without a bound.
func TestLeftPrefixesNoExceptionTUN(t *testing.T) {
	d := newDataplane(testEngine(t), fakeMap{}, 1<<20, slog.New(slog.DiscardHandler), nil)
	var prefixes []string
	for i := range 200 {
		prefixes = append(prefixes, netip.AddrFrom4([4]byte{198, 19, 9, byte(i)}).String()+"/32")
	}
	churnPrefixes(t, d, prefixes...)
	if n := d.left.Len(); n != 0 {
		t.Errorf("%d prefixes recorded as left with their routes kept, without an exception TUN; want 0", n)
	}
}

// TestLeftRoutesBounded: of the prefixes that left the configuration, the
// gateway keeps the routes into the exception TUN of the last
// maxLeftRoutes of each family to leave (3 here) and deletes the oldest's;
// a prefix that enters the configuration and leaves again counts as the
// latest. Before, every prefix ever configured kept its route: the soak
// (scripts/soak.sh) saw the gateway's routes grow by one per dummy peer,
// 18 to 180 in 7 minutes.
func TestLeftRoutesBounded(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "lb")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	// The exception TUN stands in as a veth (no tun device needed).
	w, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run("ip", "link", "set", w.A, "up"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	exc, err := a.Handle().LinkByName(w.A)
	if err != nil {
		t.Fatal(err)
	}
	d := newDataplane(testEngine(t), fakeMap{}, 1<<20, slog.New(slog.DiscardHandler), a.Handle())
	d.excLink = exc
	d.left = newLeftPrefixes(3)
	routes := func(family string) []string {
		t.Helper()
		out, err := a.Run("ip", family, "route", "show", "dev", w.A)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var dst []string
		for l := range strings.Lines(out) {
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "fe80") {
				dst = append(dst, f[0])
			}
		}
		slices.Sort(dst)
		return dst
	}
	check := func(when string, want4, want6 []string) {
		t.Helper()
		if got := routes("-4"); !slices.Equal(got, want4) {
			t.Errorf("%s: IPv4 routes into the exception TUN %v, want %v", when, got, want4)
		}
		if got := routes("-6"); !slices.Equal(got, want6) {
			t.Errorf("%s: IPv6 routes into the exception TUN %v, want %v", when, got, want6)
		}
		if n := d.left.Len(); n != len(want4)+len(want6) {
			t.Errorf("%s: %d prefixes kept, want %d", when, n, len(want4)+len(want6))
		}
	}
	var churn []string
	for i := 1; i <= 10; i++ {
		churn = append(churn, fmt.Sprintf("198.19.9.%d/32", i), fmt.Sprintf("2001:db8:9::%x/128", i))
	}
	churnPrefixes(t, d, churn...)
	check("after 10 of each family", []string{"198.19.9.10", "198.19.9.8", "198.19.9.9"},
		[]string{"2001:db8:9::8", "2001:db8:9::9", "2001:db8:9::a"})
	churnPrefixes(t, d, "198.19.9.8/32", "198.19.9.11/32")
	check("198.19.9.8 again, then 198.19.9.11", []string{"198.19.9.10", "198.19.9.11", "198.19.9.8"},
		[]string{"2001:db8:9::8", "2001:db8:9::9", "2001:db8:9::a"})
}
