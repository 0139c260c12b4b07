//go:build linux

package main

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestAllowedRoutesKeepHostRoutes: compat-mqtun's routes into its TUN
// leave a route of the host's of the same key (an interface's connected
// subnet a peer's AllowedIPs give) as it is, with a warning, as wg-quick
// does not replace it; a prefix two peers give is routed once. Before,
// the LAN's connected route was replaced by one into the TUN.
func TestAllowedRoutesKeepHostRoutes(t *testing.T) {
	testenv.Root(t)
	tp := testenv.Topology(t, "ar")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	lan, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tun, err := tp.NewVeth(a, b, topo.VethConfig{}) // stands in for the TUN
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
	ip("addr", "add", "198.18.0.1/24", "dev", lan.A)
	ip("link", "set", lan.A, "up")
	ip("link", "set", tun.A, "up")
	pfx := netip.MustParsePrefix
	f := &config.File{Peers: []config.Peer{
		{AllowedIPs: []netip.Prefix{pfx("198.18.0.0/24"), pfx("198.19.8.0/24")}},
		{AllowedIPs: []netip.Prefix{pfx("198.19.8.0/24")}},
	}}
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	var routes *mqtunRoutes
	if err := a.Do(func() (err error) { routes, err = addAllowedRoutes(log, tun.A, f); return err }); err != nil {
		t.Fatalf("addAllowedRoutes: %v", err)
	}
	if out := ip("route", "show", "exact", "198.18.0.0/24"); !strings.Contains(out, "dev "+lan.A) {
		t.Errorf("the LAN's connected route became %q", out)
	}
	if out := ip("route", "show", "exact", "198.19.8.0/24"); !strings.Contains(out, "dev "+tun.A) {
		t.Errorf("198.19.8.0/24: %q, want a route into the TUN", out)
	}
	if n := strings.Count(logged.String(), "route of the host's"); n != 1 {
		t.Errorf("%d warnings of a host's route, want 1:\n%s", n, logged.String())
	}
	// Prefixes added later (a set, a reload) are routed too, each once:
	// those routed or warned of before are not tried again.
	if err := a.Do(func() error {
		return routes.add([]netip.Prefix{pfx("198.19.9.0/24"), pfx("198.19.8.0/24"), pfx("198.18.0.0/24")})
	}); err != nil {
		t.Fatalf("add: %v", err)
	}
	if out := ip("route", "show", "exact", "198.19.9.0/24"); !strings.Contains(out, "dev "+tun.A) {
		t.Errorf("198.19.9.0/24, added later: %q, want a route into the TUN", out)
	}
	if n := strings.Count(logged.String(), "route of the host's"); n != 1 {
		t.Errorf("%d warnings of a host's route after the add, want still 1:\n%s", n, logged.String())
	}
}
