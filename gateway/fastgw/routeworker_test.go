//go:build linux

package fastgw

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
)

// holdRoutes makes d's route worker stop at the start of each job until
// release is called (entered receives once a job has stopped there); after
// release, or the test's end, the jobs go through.
func holdRoutes(t *testing.T, d *dataplane_) (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 1)
	gate := make(chan struct{})
	d.routeHook = func() {
		select {
		case in <- struct{}{}:
		default:
		}
		<-gate
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return in, release
}

// excRouteSet is the set of destinations routed into the exception TUN
// w (ip route show dev w, both families).
func excRouteSet(t *testing.T, r *routeRig) map[netip.Prefix]bool {
	t.Helper()
	got := map[netip.Prefix]bool{}
	for _, fam := range []string{"-4", "-6"} {
		for l := range strings.Lines(r.ip(fam, "route", "show", "dev", r.w.A)) {
			if p, ok := routeKey(l); ok && !strings.HasPrefix(l, "fe80") {
				got[p] = true
			}
		}
	}
	return got
}

// TestRoutesOutsideDeviceLock: a set adding peers to a gateway with an
// exception TUN has their routes installed outside the control plane's
// lock. While the route worker is held at the set's job, `wg show`
// (IpcGet) and a call that takes the lock for writing (WANAddrs, as the
// handshakes and timers take it) return, and the set itself waits until
// its routes are in: once it returns, every one is. Before, the routes
// were installed under the lock, and IpcGet waited for all of them
// (README, "Large configurations": 5-13 s for 100,000 peers).
func TestRoutesOutsideDeviceLock(t *testing.T) {
	r := newRouteRig(t, "rl", slog.DiscardHandler)
	entered, release := holdRoutes(t, r.d)
	dev, err := gateway.New(gateway.Options{Dataplane: r.d})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const n = 500
	var b strings.Builder
	want := map[netip.Prefix]bool{}
	for i := range n {
		var k noise.PublicKey
		k[0], k[1], k[2] = byte(i), byte(i>>8), 0x5b
		v4 := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)
		v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2, 14: byte(i >> 8), 15: byte(i)}), 128)
		want[v4], want[v6] = true, true
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\nallowed_ip=%s\n", k.Hex(), v4, v6)
	}
	set := make(chan error, 1)
	go func() { set <- dev.IpcSet(strings.NewReader(b.String())) }()
	select {
	case <-entered:
	case err := <-set:
		release()
		t.Fatalf("the set returned (%v) before its routes were installed", err)
	case <-time.After(30 * time.Second):
		release()
		t.Fatal("the set's routes never reached the route worker")
	}
	if ok, err := testenv.ReturnsWithin(10*time.Second, func() error { return dev.IpcGet(io.Discard) }); !ok || err != nil {
		release()
		t.Fatalf("IpcGet while the set's routes are installed: returned %v (err %v), want at once: it waits for the kernel's route work", ok, err)
	}
	if ok, _ := testenv.ReturnsWithin(10*time.Second, func() error { dev.WANAddrs(); return nil }); !ok {
		release()
		t.Fatal("WANAddrs (the device's lock) while the set's routes are installed: still waiting after 10 s")
	}
	select {
	case err := <-set:
		release()
		t.Fatalf("the set returned (%v) before its routes were installed", err)
	default:
	}
	release()
	if ok, err := testenv.ReturnsWithin(60*time.Second, func() error { return <-set }); !ok || err != nil {
		t.Fatalf("the set, its routes released: returned %v, err %v", ok, err)
	}
	got := excRouteSet(t, r)
	missing := 0
	for p := range want {
		if !got[p] {
			if missing++; missing <= 5 {
				t.Errorf("%v: not routed into the exception TUN when the set returned", p)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d prefixes not routed", missing, len(want))
	}
}

// TestRouteJobsInOrder: the route work of changes made while the worker
// is held reaches the kernel in the changes' order: a prefix added, then
// removed and pushed out of the kept ones (maxLeftRoutes, here 1), ends
// without a route (add, then delete), the one kept keeps its route, and a
// prefix removed and added again has one.
func TestRouteJobsInOrder(t *testing.T) {
	r := newRouteRig(t, "ro", slog.DiscardHandler)
	d := r.d
	d.left = newLeftPrefixes(1)
	entered, release := holdRoutes(t, d)
	pa, pb := netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("198.19.2.0/24")
	pc := netip.MustParsePrefix("2001:db8:3::/48")
	p := &fastpath.Peer{}
	change := func(c fastpath.PeerChange) {
		t.Helper()
		if err := d.UpdatePeers(c); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := testenv.ReturnsWithin(10*time.Second, func() error {
		return d.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{p}, Routes: []fastpath.Route{{Prefix: pa, Peer: p}, {Prefix: pb, Peer: p}, {Prefix: pc, Peer: p}}})
	}); !ok || err != nil {
		t.Fatalf("UpdatePeers, the route worker held: returned %v (err %v); want at once, its routes queued", ok, err)
	}
	<-entered
	change(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pa}, {Prefix: pb}, {Prefix: pc}}}) // pa out of the kept
	change(fastpath.PeerChange{Routes: []fastpath.Route{{Prefix: pc, Peer: p}}})
	release()
	d.WaitApplied()
	got := excRouteSet(t, r)
	for _, x := range []struct {
		p    netip.Prefix
		want bool
	}{{pa, false}, {pb, true}, {pc, true}} {
		if got[x.p] != x.want {
			t.Errorf("%v routed into the exception TUN: %v, want %v", x.p, got[x.p], x.want)
		}
	}
}

// TestRoutesStopReleasesSets: a set waiting for its routes returns when
// the gateway closes (stopRoutes, before the device's Close, which waits
// for the UAPI's connections), the worker held at its job; stopRoutes
// returns once the worker ends, after its chunk, and later changes queue
// nothing.
func TestRoutesStopReleasesSets(t *testing.T) {
	r := newRouteRig(t, "rs", slog.DiscardHandler)
	d := r.d
	entered, release := holdRoutes(t, d)
	dev, err := gateway.New(gateway.Options{Dataplane: d})
	if err != nil {
		t.Fatal(err)
	}
	var k noise.PublicKey
	k[0] = 0x5c
	set := make(chan error, 1)
	go func() {
		set <- dev.AddPeer(gateway.PeerConfig{PublicKey: k, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.4.0/24"), netip.MustParsePrefix("2001:db8:4::/48")}})
	}()
	<-entered
	stopped := make(chan struct{})
	go func() { d.stopRoutes(); close(stopped) }()
	if ok, err := testenv.ReturnsWithin(10*time.Second, func() error { return <-set }); !ok || err != nil {
		release()
		t.Fatalf("AddPeer waiting for its routes, the routes stopped: returned %v (err %v), want at once", ok, err)
	}
	release()
	if ok, _ := testenv.ReturnsWithin(30*time.Second, func() error { <-stopped; return nil }); !ok {
		t.Fatal("stopRoutes: the worker did not end")
	}
	dev.Close()
	d.rq.mu.Lock()
	defer d.rq.mu.Unlock()
	if d.rq.running || len(d.rq.jobs) > 0 {
		t.Errorf("after stopRoutes and Close: worker running %v, %d jobs queued; want none", d.rq.running, len(d.rq.jobs))
	}
}

// TestHostRouteKeptWhileRoutesQueued: a prefix whose key a route of the
// host's holds (a connected subnet, a static route) keeps that route when
// it leaves and comes back while the route worker has not yet reached
// the change that added it. The worker learns that the key was the
// host's (EEXIST) only at that change's job; before, the removal in
// between recorded the prefix as one whose route into the exception TUN
// is kept, and its return replaced the host's route with one into the
// exception TUN (RouteReplace): the host lost its LAN subnet or static
// route to the tunnel, as when the routes were first installed without
// asking (TestAllowedIPsKeepHostRoutes).
func TestHostRouteKeptWhileRoutesQueued(t *testing.T) {
	for _, returnHeld := range []bool{true, false} {
		t.Run(fmt.Sprintf("return while held %v", returnHeld), func(t *testing.T) {
			name := "hq"
			if !returnHeld {
				name = "hr"
			}
			r := newRouteRig(t, name, slog.DiscardHandler)
			d := r.d
			r.ip("-6", "route", "add", "2001:db8:9::/48", "via", "2001:2::2", "dev", r.v.A)
			host := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("2001:db8:9::/48")}
			p := &fastpath.Peer{}
			in, out := fastpath.PeerChange{Add: []*fastpath.Peer{p}}, fastpath.PeerChange{}
			for _, h := range host {
				in.Routes = append(in.Routes, fastpath.Route{Prefix: h, Peer: p})
				out.Routes = append(out.Routes, fastpath.Route{Prefix: h})
			}
			back := fastpath.PeerChange{Routes: in.Routes}
			change := func(c fastpath.PeerChange) {
				t.Helper()
				if err := d.UpdatePeers(c); err != nil {
					t.Fatal(err)
				}
			}
			entered, release := holdRoutes(t, d)
			change(in)
			<-entered
			change(out)
			if returnHeld {
				change(back)
				release()
			} else {
				release()
				d.WaitApplied()
				change(back)
			}
			d.WaitApplied()
			for _, h := range host {
				fam := "-4"
				if h.Addr().Is6() {
					fam = "-6"
				}
				if got := r.ip(fam, "route", "show", "exact", h.String()); !strings.Contains(got, "dev "+r.v.A) || strings.Contains(got, "dev "+r.w.A) {
					t.Errorf("the host's route of %v became %q", h, got)
				}
			}
		})
	}
}
