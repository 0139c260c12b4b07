//go:build linux

package fastgw

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
)

// TestManyRoutes: one change of thousands of peers, each with a /32 and
// a /128, routes every prefix into the exception TUN, except the two
// whose keys routes of the host's hold (a /32 and a /128 static route):
// those stay, each reported as taken (one warning each, hostRouted), as
// when the routes were installed one request at a time. After the TUN
// goes down and up, restoreRoutes installs them all again; when the peers
// are removed, the routes of the prefixes past those kept (leave) are
// deleted. The routes are sent to the kernel routeWindow a write
// (routeSocket): a write and a read a route took about twice as long
// (README, "Large configurations"). FASTGW_MANY_ROUTES
// sets the number of prefixes (default 6,000), to time a larger change.
func TestManyRoutes(t *testing.T) {
	n := 6000
	if s := os.Getenv("FASTGW_MANY_ROUTES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 4 || n > 2*65536 {
			t.Fatalf("FASTGW_MANY_ROUTES=%q: want a number of prefixes from 4 to 131072", s)
		}
	}
	manyRoutes(t, "mr", n, nil)
}

// TestManyRoutesOverrun: when the kernel drops acks of a batch (its
// receive buffer full: ENOBUFS), the routes whose results were lost are
// installed again one by one, and the window shrinks: every route is
// there and each taken key is still reported.
func TestManyRoutesOverrun(t *testing.T) {
	manyRoutes(t, "mo", 3000, func(s *routeSocket) {
		s.window = 4096
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4096); err != nil {
			t.Fatal(err)
		}
	})
}

// manyRoutes is TestManyRoutes with n prefixes, the dataplane's route
// socket changed by tweak (if not nil) first.
func manyRoutes(t *testing.T, name string, n int, tweak func(*routeSocket)) {
	h := countHandler{n: map[string]int{}}
	r := newRouteRig(t, name, h)
	if tweak != nil {
		tweak(r.d.rs)
	}
	v, w, d, ip := r.v, r.w, r.d, r.ip
	v4 := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)
	}
	v6 := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(i >> 8), 15: byte(i)}), 128)
	}
	host := []netip.Prefix{v4(7), v6(9)}
	ip("route", "add", host[0].String(), "via", "198.18.0.2", "dev", v.A)
	ip("-6", "route", "add", host[1].String(), "via", "2001:2::2", "dev", v.A)
	var add fastpath.PeerChange
	for i := range n / 2 {
		p := &fastpath.Peer{}
		add.Add = append(add.Add, p)
		add.Routes = append(add.Routes, fastpath.Route{Prefix: v4(i), Peer: p}, fastpath.Route{Prefix: v6(i), Peer: p})
	}
	start := time.Now()
	if err := d.UpdatePeers(add); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	t.Logf("UpdatePeers of %d peers routed %d prefixes into the exception TUN in %v (%d writes)", n/2, n, time.Since(start).Round(time.Millisecond), d.rs.writes)
	if tweak == nil && d.rs.writes > n/routeWindow+1 {
		t.Errorf("%d writes to the kernel for %d routes, want at most %d (%d a write)", d.rs.writes, n, n/routeWindow+1, routeWindow)
	}
	check := func(when string) {
		t.Helper()
		got := map[netip.Prefix]bool{}
		for _, fam := range []string{"-4", "-6"} {
			out := ip(fam, "route", "show", "dev", w.A)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			t.Logf("%s: %s: %d routes, the first: %q", when, fam, len(lines), lines[0])
			for _, l := range lines {
				if p, ok := routeKey(l); ok {
					got[p] = true
				}
			}
		}
		missing := 0
		for i := range n / 2 {
			for _, p := range []netip.Prefix{v4(i), v6(i)} {
				isHost := p == host[0] || p == host[1]
				if got[p] == isHost {
					if missing++; missing <= 5 {
						t.Errorf("%s: %v: routed into the exception TUN %v, want %v", when, p, got[p], !isHost)
					}
				}
			}
		}
		if missing > 5 {
			t.Errorf("%s: %d prefixes wrong in all", when, missing)
		}
		for _, fam := range []string{"-4", "-6"} {
			i := 0
			if fam == "-6" {
				i = 1
			}
			if out := ip(fam, "route", "show", "exact", host[i].String()); !strings.Contains(out, "dev "+v.A) {
				t.Errorf("%s: the host's route of %v became %q", when, host[i], out)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range host {
			if e := d.entries[p]; e == nil || !e.hostRouted {
				t.Errorf("%s: %v not noted as the host's (hostRouted)", when, p)
			}
		}
		if d.hostRouted != 2 {
			t.Errorf("%s: hostRouted %d, want 2", when, d.hostRouted)
		}
		warned := 0
		for m, c := range h.n {
			if strings.Contains(m, "route of the host's") {
				warned += c
			}
		}
		if warned != 2 {
			t.Errorf("%s: %d warnings of a host's route, want 2 (%v)", when, warned, h.n)
		}
	}
	check("added")
	ip("link", "set", w.A, "down")
	ip("link", "set", w.A, "up")
	start = time.Now()
	d.restoreRoutes()
	t.Logf("restoreRoutes routed %d prefixes again in %v", n, time.Since(start).Round(time.Millisecond))
	check("down, up, restoreRoutes")
	// All leave but the last kept of each family that left (leave):
	// the others' routes are deleted, in batches too.
	const kept = 100
	d.mu.Lock()
	d.left.max = kept
	d.mu.Unlock()
	remove := fastpath.PeerChange{Remove: add.Add}
	for _, r := range add.Routes {
		remove.Routes = append(remove.Routes, fastpath.Route{Prefix: r.Prefix})
	}
	start = time.Now()
	if err := d.UpdatePeers(remove); err != nil {
		t.Fatal(err)
	}
	d.WaitApplied()
	t.Logf("UpdatePeers removing them deleted %d routes in %v", n-2-2*kept, time.Since(start).Round(time.Millisecond))
	for _, fam := range []string{"-4", "-6"} {
		got := 0
		for l := range strings.Lines(ip(fam, "route", "show", "dev", w.A)) {
			if !strings.HasPrefix(l, "fe80:") {
				got++
			}
		}
		if got != kept {
			t.Errorf("removed: %s: %d routes into the exception TUN, want the %d kept", fam, got, kept)
		}
	}
	if d.left.Len() != 2*kept {
		t.Errorf("removed: %d prefixes kept, want %d", d.left.Len(), 2*kept)
	}
	if tweak != nil {
		t.Logf("window after: %d", r.d.rs.window)
		if r.d.rs.window >= 4096 {
			t.Errorf("the window stayed %d after acks were lost", r.d.rs.window)
		}
	}
}

// routeKey is the destination of a line of `ip route show` as a prefix
// (a host route's has no length), and whether it is one.
func routeKey(line string) (netip.Prefix, bool) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return netip.Prefix{}, false
	}
	s := f[0]
	if !strings.Contains(s, "/") {
		if strings.Contains(s, ":") {
			s += "/128"
		} else {
			s += "/32"
		}
	}
	p, err := netip.ParsePrefix(s)
	return p, err == nil
}
