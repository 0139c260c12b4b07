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

// TestLeftPrefixRoutedElsewhere: a prefix that left the configuration,
// whose route into the exception TUN the operator deleted and replaced by
// a route of their own (README: `ip route del` gives it back), keeps their
// route when the TUN goes down and up or its subscription is renewed; a
// left prefix nobody routed elsewhere gets its route into the TUN back,
// and one whose route into the TUN is still there stays kept. Before,
// every restore replaced the operator's route by one into the TUN, whose
// engine drops what it carries (no_route).
// routeRig is a dataplane_ in namespace a of a topology named name: a
// LAN veth (v.A, 198.18.0.1/24 and 2001:2::1/64), a second veth up in
// place of the exception TUN (w.A: no tun device needed), its log going to
// h. ip runs `ip` in a.
type routeRig struct {
	v, w topo.Veth
	d    *dataplane_
	ip   func(args ...string) string
}

func newRouteRig(t *testing.T, name string, h slog.Handler) *routeRig {
	testenv.Root(t)
	tp := testenv.Topology(t, name)
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
	w, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ip("link", "set", w.A, "up")
	exc, err := a.Handle().LinkByName(w.A)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb, err := memport.NewPair(memport.Config{Name: name, MACA: net.HardwareAddr{2, 0, 0, 0, 9, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pa.Close(); pb.Close() })
	eng, err := fastpath.New(fastpath.Config{LAN: pa, WAN: pb, ListenPort: 51820, WANAddr4: netip.MustParseAddr("198.18.0.1"),
		WANResolver: anyMAC{}, LANResolver: anyMAC{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	d := newDataplane(eng, fakeMap{}, 1<<20, slog.New(h), a.Handle())
	d.excLink = exc
	if err := a.Do(func() (err error) { d.rs, err = openRouteSocket(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.closeRouteSocket)
	t.Cleanup(d.stopRoutes) // first: no job left to use the socket
	return &routeRig{v: *v, w: *w, d: d, ip: ip}
}

func TestLeftPrefixRoutedElsewhere(t *testing.T) {
	r := newRouteRig(t, "lr", countHandler{n: map[string]int{}})
	v, w, d, ip := r.v, r.w, r.d, r.ip
	elsewhere := []string{"198.19.7.0/24", "2001:db8:7::/48"}
	kept := []string{"198.19.8.0/24", "2001:db8:8::/48"}
	p := &fastpath.Peer{}
	add := fastpath.PeerChange{Add: []*fastpath.Peer{p}}
	remove := fastpath.PeerChange{Remove: []*fastpath.Peer{p}}
	for _, s := range append(elsewhere, kept...) {
		add.Routes = append(add.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s), Peer: p})
		remove.Routes = append(remove.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s)})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	if err := d.UpdatePeers(remove); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	for _, s := range elsewhere {
		gw := "198.18.0.2"
		if strings.Contains(s, ":") {
			gw = "2001:2::2"
		}
		ip("route", "del", s, "dev", w.A)
		ip("route", "add", s, "via", gw, "dev", v.A)
	}
	show := func(s string) string {
		t.Helper()
		if strings.Contains(s, ":") {
			return ip("-6", "route", "show", "exact", s)
		}
		return ip("route", "show", "exact", s)
	}
	check := func(when string) {
		t.Helper()
		for _, s := range elsewhere {
			if out := show(s); !strings.Contains(out, "via") || strings.Contains(out, "dev "+w.A) {
				t.Errorf("%s: the operator's route of %s became: %q", when, s, out)
			}
		}
		for _, s := range kept {
			if out := show(s); !strings.Contains(out, "dev "+w.A) {
				t.Errorf("%s: the kept route of %s into the exception TUN is: %q", when, s, out)
			}
		}
	}
	// The subscription renewed with nothing missing but the operator's.
	if _, err := d.restoreMissingRoutes(); err != nil {
		t.Fatal(err)
	}
	check("restoreMissingRoutes")
	// The exception TUN goes down (the kernel flushes its routes) and
	// up; the watcher restores.
	ip("link", "set", w.A, "down")
	ip("link", "set", w.A, "up")
	d.restoreRoutes()
	check("down, up, restoreRoutes")
	// A restore that finds the kept routes still there keeps them.
	d.restoreRoutes()
	check("restoreRoutes again")
	d.mu.Lock()
	left := d.left.Len()
	d.mu.Unlock()
	if left != len(kept) {
		t.Errorf("%d prefixes kept, want %d (%v)", left, len(kept), kept)
	}
}
