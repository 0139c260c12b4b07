//go:build linux

package srcaddr

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestRoutes: the kernel's source toward a destination, in a namespace:
// the primary IPv4 address of the subnet; the IPv6 address added first,
// not the deprecated one added after it (preferred_lft 0, which the
// kernel lists first); a route's src once the route is added, reported
// by Changed, with Generation moved on; answers cached (one question
// per destination until a change; Cached reads them without asking), at
// most the bound; Ask has one asked in the background.
func TestRoutes(t *testing.T) {
	a, v, ip := routesNS(t, "sr")
	for _, err := range []error{
		a.AddAddr(v.A, "198.18.5.1/24"), a.AddAddr(v.A, "198.18.5.100/24"), a.AddAddr(v.A, "2001:2:5::1/64"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ip("addr", "add", "2001:2:5::100/64", "dev", v.A, "preferred_lft", "0", "nodad")
	const size = 4
	settle(t, a)
	r, err := NewRoutes(a.NsHandle(), size, func(err error) { t.Errorf("subscription: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := netip.MustParseAddr
	for dst, want := range map[string]string{"198.18.5.2": "198.18.5.1", "2001:2:5::2": "2001:2:5::1", "::ffff:198.18.5.3": "198.18.5.1", "198.18.9.9": ""} {
		var w netip.Addr
		if want != "" {
			w = addr(want)
		}
		if got := r.Source(addr(dst)); got != w {
			t.Errorf("Source(%s) = %v, want %v", dst, got, w)
		}
	}
	n := r.Lookups.Load()
	if got := r.Source(addr("198.18.5.2")); got != addr("198.18.5.1") || r.Lookups.Load() != n {
		t.Errorf("Source(198.18.5.2) again = %v after %d questions, want 198.18.5.1 from the cache", got, r.Lookups.Load()-n)
	}
	if got, ok := r.Cached(addr("198.18.5.2")); got != addr("198.18.5.1") || !ok {
		t.Errorf("Cached(198.18.5.2) = %v, %v, want 198.18.5.1, true", got, ok)
	}
	if got, ok := r.Cached(addr("198.18.5.77")); ok || r.Lookups.Load() != n {
		t.Errorf("Cached(198.18.5.77), never asked = %v, %v after %d questions, want none, false, none asked", got, ok, r.Lookups.Load()-n)
	}
	r.Ask(addr("198.18.5.77"))
	if !testenv.PollUntil(5*time.Second, func() bool { src, ok := r.Cached(addr("198.18.5.77")); return ok && src == addr("198.18.5.1") }) {
		t.Error("Ask(198.18.5.77): no answer cached within 5 s")
	}
	gen := r.Generation()

	// A change reported since NewRoutes (none here) is drained first.
	select {
	case <-r.Changed():
	default:
	}
	ip("route", "add", "198.18.5.2/32", "dev", v.A, "src", "198.18.5.100")
	select {
	case <-r.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("no change reported within 5 s of a route added")
	}
	if got := r.Source(addr("198.18.5.2")); got != addr("198.18.5.100") {
		t.Errorf("Source(198.18.5.2) after a route with src 198.18.5.100 = %v", got)
	}
	if r.Generation() == gen {
		t.Errorf("Generation = %d after a change, want it moved on", gen)
	}
	ip("-6", "route", "add", "2001:2:5::2/128", "dev", v.A, "src", "2001:2:5::100")
	if !testenv.PollUntil(5*time.Second, func() bool { return r.Source(addr("2001:2:5::2")) == addr("2001:2:5::100") }) {
		t.Errorf("Source(2001:2:5::2) after a route with src 2001:2:5::100 = %v", r.Source(addr("2001:2:5::2")))
	}

	for i := range 3 * size {
		r.Source(netip.AddrFrom4([4]byte{198, 18, 5, byte(10 + i)}))
	}
	r.mu.Lock()
	held := len(r.cache)
	r.mu.Unlock()
	if held > size {
		t.Errorf("cache holds %d answers, want %d at most", held, size)
	}
}

// TestRoutesChangeScoped: a route added or removed drops the cached
// answers toward the addresses its prefix holds and no others (a routing
// daemon's churn asks the kernel again only for the endpoints it may have
// moved), the default route's those of its family, a change of addresses
// all of them; the answers asked again follow the change.
func TestRoutesChangeScoped(t *testing.T) {
	a, v, ip := routesNS(t, "srs")
	for _, err := range []error{a.AddAddr(v.A, "198.18.6.1/24"), a.AddAddr(v.A, "198.18.6.100/24"), a.AddAddr(v.A, "2001:2:6::1/64")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ip("route", "add", "default", "via", "198.18.6.2")
	settle(t, a)
	r, err := NewRoutes(a.NsHandle(), DefaultRoutes, func(err error) { t.Errorf("subscription: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := netip.MustParseAddr
	dsts := []netip.Addr{addr("198.18.6.7"), addr("198.18.40.1"), addr("198.18.40.129"), addr("198.19.1.1"), addr("2001:2:6::7")}
	for _, d := range dsts {
		if !r.Source(d).IsValid() {
			t.Fatalf("Source(%s): none", d)
		}
	}
	// step makes a change (do) and waits until the answers toward drop
	// are dropped; then the others must still be cached, and all are
	// asked again.
	step := func(what string, do func(), drop ...netip.Addr) {
		t.Helper()
		gen := r.Generation()
		do()
		if !testenv.PollUntil(5*time.Second, func() bool {
			if r.Generation() == gen {
				return false
			}
			for _, d := range drop {
				if _, ok := r.Cached(d); ok {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("%s: the answers toward %v not dropped within 5 s", what, drop)
		}
		for _, d := range dsts {
			if _, ok := r.Cached(d); !ok && !slices.Contains(drop, d) {
				t.Errorf("%s: the answer toward %s dropped too", what, d)
			}
		}
		for _, d := range dsts {
			r.Source(d)
		}
	}
	step("a /25 route with its own src", func() { ip("route", "add", "198.18.40.0/25", "via", "198.18.6.2", "src", "198.18.6.100") }, dsts[1])
	if got := r.Source(dsts[1]); got != addr("198.18.6.100") {
		t.Errorf("Source(%s) after a route with src 198.18.6.100 = %v", dsts[1], got)
	}
	step("the /25 removed", func() { ip("route", "del", "198.18.40.0/25") }, dsts[1])
	if got := r.Source(dsts[1]); got != addr("198.18.6.1") {
		t.Errorf("Source(%s) after its route's removal = %v, want 198.18.6.1", dsts[1], got)
	}
	step("the default route replaced", func() { ip("route", "replace", "default", "via", "198.18.6.3") }, dsts[:4]...)
	step("an address added", func() { ip("addr", "add", "198.18.6.50/24", "dev", v.A) }, dsts...)
}

// TestChangeBounded: a run of more route changes than maxRunPrefixes, or
// one of a route this package cannot read, drops every answer.
func TestChangeBounded(t *testing.T) {
	var c change
	for i := range maxRunPrefixes {
		c.route(&netlink.Route{Family: unix.AF_INET, Dst: &net.IPNet{IP: net.IPv4(198, 18, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)}})
	}
	if c.all || len(c.prefixes) != maxRunPrefixes || c.prefixes[1] != netip.MustParsePrefix("198.18.1.0/24") {
		t.Fatalf("after %d routes: all %v, prefixes %v", maxRunPrefixes, c.all, c.prefixes)
	}
	c.route(&netlink.Route{Family: unix.AF_INET, Dst: &net.IPNet{IP: net.IPv4(198, 19, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}})
	if !c.all {
		t.Error("one route more than maxRunPrefixes: not all")
	}
	c.reset()
	if c.any() {
		t.Error("after reset: a change")
	}
	c.route(&netlink.Route{Family: unix.AF_INET6})
	if c.all || len(c.prefixes) != 1 || c.prefixes[0] != netip.MustParsePrefix("::/0") {
		t.Errorf("the IPv6 default route: all %v, prefixes %v, want ::/0", c.all, c.prefixes)
	}
	c.reset()
	c.route(&netlink.Route{Family: unix.AF_BRIDGE})
	if !c.all {
		t.Error("a default route of another family: not all")
	}
}

// routesNS makes namespace a of a topology named name, with a veth v to
// another, and ip, which runs ip(8) in a (failing the test on an error).
// It returns once the kernel's own address changes on v.A are over: the
// IPv6 link-local address it adds when the carrier comes up (in its
// linkwatch work, later on a busy machine) and announces again when its
// duplicate address detection ends (1-2 s). Each is an address
// notification, which drops every cached answer: one during
// TestRoutesChangeScoped dropped the answer toward 2001:2:6::7 when only
// the IPv4 default route changed.
func routesNS(t *testing.T, name string) (a *topo.NS, v *topo.Veth, ip func(args ...string)) {
	t.Helper()
	tp := testenv.Topology(t, name)
	a = testenv.NS(t, tp, "a")
	v = testenv.Veth(t, tp, a, testenv.NS(t, tp, "b"))
	var out string
	if !testenv.PollUntil(10*time.Second, func() bool {
		var err error
		out, err = a.Run("ip", "-6", "addr", "show", "dev", v.A)
		return err == nil && strings.Contains(out, "scope link") && !strings.Contains(out, "tentative")
	}) {
		t.Fatalf("%s in %s has no IPv6 link-local address out of duplicate address detection after 10 s:\n%s", v.A, a.Name, out)
	}
	return a, v, func(args ...string) {
		t.Helper()
		if out, err := a.Run("ip", args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// TestRoutesNexthopObject: a route that names a nexthop object (`ip route
// add PREFIX nhid N`, as routing daemons install them) changes its source
// when the object is replaced with a next hop in another subnet; with
// net.ipv4.nexthop_compat_mode = 0 the kernel reports only the nexthop's
// change, no route's, and the cached answer must still go.
func TestRoutesNexthopObject(t *testing.T) {
	a, v, ip := routesNS(t, "srn")
	for _, err := range []error{a.AddAddr(v.A, "198.18.7.1/24"), a.AddAddr(v.A, "198.18.8.1/24")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if out, err := a.Run("sh", "-c", "echo 0 > /proc/sys/net/ipv4/nexthop_compat_mode"); err != nil {
		t.Fatalf("nexthop_compat_mode = 0: %v: %s", err, out)
	}
	ip("nexthop", "add", "id", "7", "via", "198.18.7.2", "dev", v.A)
	ip("route", "add", "198.18.70.0/24", "nhid", "7")
	settle(t, a)
	r, err := NewRoutes(a.NsHandle(), DefaultRoutes, func(err error) { t.Errorf("subscription: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := netip.MustParseAddr
	dst := addr("198.18.70.5")
	if got := r.Source(dst); got != addr("198.18.7.1") {
		t.Fatalf("Source(%v) through nexthop 7 via 198.18.7.2 = %v, want 198.18.7.1", dst, got)
	}
	select { // a change reported since NewRoutes (none here) is drained first
	case <-r.Changed():
	default:
	}
	ip("nexthop", "replace", "id", "7", "via", "198.18.8.2", "dev", v.A)
	select {
	case <-r.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("no change reported within 5 s of the nexthop object replaced")
	}
	if got := r.Source(dst); got != addr("198.18.8.1") {
		t.Errorf("Source(%v) after nexthop 7 moved to 198.18.8.2 = %v, want 198.18.8.1", dst, got)
	}
}

// settle returns once the kernel of namespace a has sent no address or
// route notification for a second (at most 15 s): the addresses a test
// has just added finish their work first (the kernel announces a nodad
// IPv6 address again from its addrconf work queue, which a busy machine
// runs late), and each such notification drops every cached answer, so
// that a test checking the cache saw answers dropped by no change of its
// own (TestRoutes and TestRoutesChangeScoped failed so under load).
func settle(t *testing.T, a *topo.NS) {
	t.Helper()
	ns := a.NsHandle()
	routes, addrs, done := make(chan netlink.RouteUpdate, 256), make(chan netlink.AddrUpdate, 256), make(chan struct{})
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{Namespace: &ns}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{Namespace: &ns}); err != nil {
		close(done)
		t.Fatal(err)
	}
	defer func() {
		close(done)
		go drain(routes, addrs)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-routes:
		case <-addrs:
		case <-time.After(time.Second):
			return
		}
	}
	t.Fatalf("namespace %s: address and route notifications for 15 s", a.Name)
}

// TestRoutesFailedQuestion: a question the kernel failed to answer
// (ENOBUFS) gives no source and is not cached: the next Source asks
// again and gets the route's; the failure is reported once per run of
// them. The kernel's verdict that there is no route is cached.
func TestRoutesFailedQuestion(t *testing.T) {
	a, v, _ := routesNS(t, "sf")
	if err := a.AddAddr(v.A, "198.18.6.1/24"); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	var reported []error
	var mu sync.Mutex
	r, err := NewRoutes(a.NsHandle(), 16, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fails := 2
	r.askMu.Lock()
	get := r.routeGet
	r.routeGet = func(dst net.IP) ([]netlink.Route, error) {
		if fails > 0 {
			fails--
			return nil, unix.ENOBUFS
		}
		return get(dst)
	}
	r.askMu.Unlock()
	dst, want := netip.MustParseAddr("198.18.6.2"), netip.MustParseAddr("198.18.6.1")
	for i := range 2 {
		if got := r.Source(dst); got.IsValid() {
			t.Fatalf("Source, question %d failed = %v, want none", i+1, got)
		}
		if got, ok := r.Cached(dst); ok {
			t.Fatalf("Cached after a failed question = %v, true: the failure was cached", got)
		}
	}
	if got := r.Source(dst); got != want || r.Lookups.Load() != 3 {
		t.Fatalf("Source after the failures = %v in %d questions, want %v in 3", got, r.Lookups.Load(), want)
	}
	mu.Lock()
	if len(reported) != 1 || !errors.Is(reported[0], unix.ENOBUFS) {
		t.Errorf("reported %v, want one ENOBUFS", reported)
	}
	mu.Unlock()
	none := netip.MustParseAddr("198.18.99.1") // no route: the kernel's verdict
	if got := r.Source(none); got.IsValid() {
		t.Fatalf("Source(%v), no route = %v", none, got)
	}
	n := r.Lookups.Load()
	if got, ok := r.Cached(none); !ok || got.IsValid() || r.Source(none).IsValid() || r.Lookups.Load() != n {
		t.Errorf("no route: Cached = %v, %v; asked again %d times, want none cached, none asked", got, ok, r.Lookups.Load()-n)
	}
}
