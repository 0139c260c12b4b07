//go:build linux

package fastgw

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
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
	h := countHandler{n: map[string]int{}}
	r := newRouteRig(t, "hr", h)
	v, w, d, ip := r.v, r.w, r.d, r.ip
	ip("-6", "route", "add", "2001:db8:9::/48", "via", "2001:2::2", "dev", v.A)
	host := []string{"198.18.0.0/24", "2001:db8:9::/48"}
	ours := []string{"198.19.8.0/24", "2001:2::/64", "198.18.7.0/24"} // the IPv6 connected route has metric 256: ours beside it
	p := &fastpath.Peer{}
	add := fastpath.PeerChange{Add: []*fastpath.Peer{p}}
	for _, s := range append(host, ours...) {
		add.Routes = append(add.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s), Peer: p})
	}
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
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
	// The host's static route deleted: the prefix is routed into the
	// exception TUN again at the next address change (Retake), where it
	// followed the host's other routes.
	ip("-6", "route", "del", "2001:db8:9::/48", "via", "2001:2::2", "dev", v.A)
	d.Retake(nil)
	if out := show("2001:db8:9::/48"); !strings.Contains(out, "dev "+w.A) {
		t.Errorf("the host's route gone, %s: %q, want it into the exception TUN", "2001:db8:9::/48", out)
	}
	host = host[:1]
	ours = append(ours, "2001:db8:9::/48")
	check("the host's route gone, retaken", 2)
	// An address added since whose subnet is a prefix routed into the
	// exception TUN: the kernel appends its connected route behind ours,
	// which would keep taking the subnet; Retake gives the key back to
	// the host's route (before, the host's packets to 198.18.7.0/24 went
	// into the exception TUN).
	ip("addr", "add", "198.18.7.1/24", "dev", v.A)
	d.Retake([]netip.Prefix{netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("198.18.7.1/24"), netip.MustParsePrefix("2001:2::1/64")})
	if out := ip("route", "get", "198.18.7.9"); !strings.Contains(out, "dev "+v.A) {
		t.Errorf("the LAN's subnet added since: a packet to it goes %q, want dev %s", out, v.A)
	}
	host = append(host, "198.18.7.0/24")
	ours = []string{"198.19.8.0/24", "2001:2::/64", "2001:db8:9::/48"}
	check("an address added since, its subnet yielded", 3)
	d.Retake(nil) // the host's route there: nothing to take
	check("an address added since, Retake again", 3)
	// Removed, a host-routed prefix is not kept as one of ours.
	remove := fastpath.PeerChange{Remove: []*fastpath.Peer{p}}
	for _, s := range append(host, ours...) {
		remove.Routes = append(remove.Routes, fastpath.Route{Prefix: netip.MustParsePrefix(s)})
	}
	if err := d.UpdatePeers(remove); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	d.mu.Lock()
	left := d.left.Len()
	d.mu.Unlock()
	if left != len(ours) {
		t.Errorf("%d prefixes kept after removal, want %d (%v)", left, len(ours), ours)
	}
	check("removed", 3)
}
