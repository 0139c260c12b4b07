//go:build linux

package fastgw

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestAllowedIPsKeepHostRoutes: a peer's allowed-IPs prefix that is the
// key of a route of the host's (an interface's connected subnet, an IPv6
// static route of the default metric) leaves that route as it is, with a
// warning, as wg-quick refuses to route such a prefix into wg0; the
// decrypted packets to it go by that route (PrefixLen: before the
// tunnel). Other prefixes get their routes into the exception TUN, and
// restoring the routes warns of nothing more. Before, the connected
// route was replaced by one into the exception TUN: the host lost its
// LAN, for good once the gateway stopped.
func TestAllowedIPsKeepHostRoutes(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "hr")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ip := func(args ...string) string {
		t.Helper()
		out, err := a.Run("ip", args...)
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return out
	}
	ip("addr", "add", "198.18.0.1/24", "dev", v.A)
	ip("addr", "add", "2001:2::1/64", "dev", v.A, "nodad")
	ip("link", "set", v.A, "up")
	ip("-6", "route", "add", "2001:db8:9::/48", "via", "2001:2::2", "dev", v.A)
	// The exception TUN stands in as a second veth (no tun device needed).
	w, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ip("link", "set", w.A, "up")
	exc, err := a.Handle().LinkByName(w.A)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb, err := memport.NewPair(memport.Config{Name: "hr", MACA: net.HardwareAddr{2, 0, 0, 0, 9, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	defer pb.Close()
	eng, err := fastpath.New(fastpath.Config{LAN: pa, WAN: pb, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
		WANResolver: anyMAC{}, LANResolver: anyMAC{}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	h := countHandler{n: map[string]int{}}
	d := newDataplane(eng, fakeMap{}, 1<<20, slog.New(h), a.Handle())
	d.excLink = exc
	host := []string{"198.18.0.0/24", "2001:db8:9::/48"}
	ours := []string{"198.19.8.0/24", "2001:2::/64"} // the IPv6 connected route has metric 256: ours beside it
	p := &fastpath.Peer{}
	add := fastpath.PeerChange{Add: []*fastpath.Peer{p}}
	for _, s := range append(host, ours...) {
		add.Routes = append(add.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s), Peer: p})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	show := func(s string) string {
		t.Helper()
		if strings.Contains(s, ":") {
			return ip("-6", "route", "show", "exact", s)
		}
		return ip("route", "show", "exact", s)
	}
	warnings := func() int {
		n := 0
		for m, c := range h.n {
			if strings.Contains(m, "route of the host's") {
				n += c
			}
		}
		return n
	}
	check := func(when string, wantWarnings int) {
		t.Helper()
		for _, s := range host {
			if out := show(s); !strings.Contains(out, "dev "+v.A) || strings.Contains(out, "dev "+w.A) {
				t.Errorf("%s: the host's route of %s became: %q", when, s, out)
			}
		}
		for _, s := range ours {
			if out := show(s); !strings.Contains(out, "dev "+w.A) {
				t.Errorf("%s: no route of %s into the exception TUN: %q", when, s, out)
			}
		}
		if n := warnings(); n != wantWarnings {
			t.Errorf("%s: %d warnings of a host's route, want %d (%v)", when, n, wantWarnings, h.n)
		}
	}
	check("added", len(host))
	d.restoreRoutes()
	check("restoreRoutes, ours there", len(host))
	ip("link", "set", w.A, "down")
	ip("link", "set", w.A, "up")
	d.restoreRoutes()
	check("down, up, restoreRoutes", len(host))
	if _, err := d.restoreMissingRoutes(); err != nil {
		t.Fatal(err)
	}
	check("restoreMissingRoutes", len(host))
	// Removed, a host-routed prefix is not kept as one of ours.
	remove := fastpath.PeerChange{Remove: []*fastpath.Peer{p}}
	for _, s := range append(host, ours...) {
		remove.Routes = append(remove.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s)})
	}
	if err := d.UpdatePeers(remove); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	left := d.left.Len()
	d.mu.Unlock()
	if left != len(ours) {
		t.Errorf("%d prefixes kept after removal, want %d (%v)", left, len(ours), ours)
	}
	check("removed", len(host))
}
