package gateway

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
)

// fakeRoutes is a RouteSources whose route's source is set by the test,
// cached as srcaddr.Routes caches it.
type fakeRoutes struct {
	mu      sync.Mutex
	route   netip.Addr
	cache   map[netip.Addr]netip.Addr
	gen     uint64
	lookups int
	// asking, if set, runs inside a miss's question, before its answer
	// (routes that change while the kernel is asked).
	asking func()
}

func (f *fakeRoutes) Source(dst netip.Addr) netip.Addr {
	if src, ok := f.Cached(dst); ok {
		return src
	}
	f.mu.Lock()
	gen, src, asking := f.gen, f.route, f.asking
	f.lookups++
	f.asking = nil
	f.mu.Unlock()
	if asking != nil {
		asking()
	}
	f.mu.Lock()
	if f.gen == gen {
		f.cache[dst] = src
	}
	f.mu.Unlock()
	return src
}

func (f *fakeRoutes) Cached(dst netip.Addr) (netip.Addr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	src, ok := f.cache[dst]
	return src, ok
}

func (f *fakeRoutes) Generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// change sets the route's source and drops what is cached, as a change of
// the kernel's routes does.
func (f *fakeRoutes) change(src netip.Addr) {
	f.mu.Lock()
	f.route = src
	clear(f.cache)
	f.gen++
	f.mu.Unlock()
}

func (f *fakeRoutes) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

// TestSourceOfRoute: a configured endpoint not heard from is sent to
// from the source its route chooses (Options.Source), as Linux's
// WireGuard sends with its route lookup's source, asked when it sends,
// not when it is configured: configuring asks nothing (a cached answer
// is taken, else the default for now), the initiation's source
// (sendSource, runInitiation's) asks and keeps the answer on the
// endpoint; a change of routes or of the WAN's addresses asks nothing
// for a peer without a session (its next initiation does); an answer of
// another family, or none, gives the default. Once the peer is heard
// from, the endpoint keeps the address its packet reached; configured
// again while it has a session, the route is asked in the background.
func TestSourceOfRoute(t *testing.T) {
	def4 := netip.MustParseAddr("198.18.0.1")
	def6 := netip.MustParseAddr("2001:2::1")
	virt := netip.MustParseAddr("198.18.0.100")
	routes := &fakeRoutes{route: virt, cache: map[netip.Addr]netip.Addr{}}
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "127.0.0.1:2", source: routes})
	fp := r.fp()
	if ep := fp.Endpoint.Load(); ep == nil || ep.Src != def4 || !ep.Routed || routes.asked() != 0 {
		t.Fatalf("configured endpoint = %+v after %d questions, want Src %v, Routed, none asked", ep, routes.asked(), def4)
	}
	initSrc := func() netip.Addr {
		ep := fp.Endpoint.Load()
		return r.dev.sendSource(fp, fastpath.ControlPacket{Dst: ep.Dst, Src: ep.Src})
	}
	for _, c := range []struct {
		route, want netip.Addr
		change      func()
	}{
		{virt, virt, func() {}},
		{def4, def4, r.dev.RefreshSources},
		{virt, virt, func() { r.dev.SetWANAddrs(def4, def6, virt) }},
		{netip.Addr{}, def4, r.dev.RefreshSources},
		{def6, def4, r.dev.RefreshSources},
		{virt, virt, r.dev.RefreshSources},
	} {
		before := *fp.Endpoint.Load()
		routes.change(c.route)
		c.change()
		if ep := fp.Endpoint.Load(); *ep != before {
			t.Errorf("route's source %v: a change made the endpoint of a peer without a session %+v, want it kept (%+v)", c.route, *ep, before)
		}
		n := routes.asked()
		if src := initSrc(); src != c.want {
			t.Errorf("route's source %v: initiation from %v, want %v", c.route, src, c.want)
		}
		if ep := fp.Endpoint.Load(); ep.Src != c.want || !ep.Routed || routes.asked() != n+1 {
			t.Errorf("route's source %v: endpoint after the initiation %+v, %d questions; want Src %v, Routed, 1 question", c.route, ep, routes.asked()-n, c.want)
		}
	}
	// Configured again, its answer cached: taken at once.
	if err := r.dev.AddPeer(PeerConfig{PublicKey: r.wgPub, PresharedKey: r.psk, Endpoint: netip.MustParseAddrPort("127.0.0.1:2"),
		AllowedIPs: []netip.Prefix{netip.PrefixFrom(wgInner, 32)}}); err != nil {
		t.Fatal(err)
	}
	if ep := fp.Endpoint.Load(); ep.Src != virt || !ep.Routed {
		t.Errorf("endpoint configured again = %+v, want Src %v (cached), Routed", ep, virt)
	}

	r.establishAsInitiator()
	init := ofType(r.f.sentSince(0), noise.TypeInitiation, 0)
	if len(init) == 0 || init[0].src != virt {
		t.Errorf("initiations = %+v, want the first from %v", init, virt)
	}
	// The response reached r.f.ourDst, the default: heard from.
	if ep := fp.Endpoint.Load(); ep.Src != def4 || ep.Routed {
		t.Fatalf("endpoint after the response = %+v, want Src %v, not Routed", ep, def4)
	}
	routes.change(virt)
	r.dev.RefreshSources()
	r.dev.SetWANAddrs(def4, def6, virt)
	if ep := fp.Endpoint.Load(); ep.Src != def4 || ep.Routed {
		t.Errorf("endpoint heard from after routes changed = %+v, want Src %v kept", ep, def4)
	}

	// Configured again with a session, nothing cached: the source it had
	// for now, the route's asked in the background (the workers send
	// to it without a handshake).
	routes.change(virt)
	n := routes.asked()
	if err := r.dev.AddPeer(PeerConfig{PublicKey: r.wgPub, PresharedKey: r.psk, Endpoint: netip.MustParseAddrPort("127.0.0.1:2"),
		AllowedIPs: []netip.Prefix{netip.PrefixFrom(wgInner, 32)}}); err != nil {
		t.Fatal(err)
	}
	if !testenv.PollUntil(5*time.Second, func() bool { ep := fp.Endpoint.Load(); return ep.Src == virt && ep.Routed }) {
		t.Errorf("endpoint configured again with a session = %+v, want Src %v, Routed, within 5 s", fp.Endpoint.Load(), virt)
	}
	if got := routes.asked() - n; got != 1 {
		t.Errorf("%d questions for the endpoint configured again, want 1", got)
	}
	// With a session, a change of routes asks again at once.
	routes.change(def4)
	r.dev.RefreshSources()
	if ep := fp.Endpoint.Load(); ep.Src != def4 || !ep.Routed {
		t.Errorf("endpoint with a session after routes changed = %+v, want Src %v, Routed", ep, def4)
	}
}

// TestRerouteChangeWhileAsking: routes that change while the source of
// an endpoint is being asked (its answer of before the change) have it
// asked again, so that the endpoint ends with the answer of after the
// change whoever wrote last.
func TestRerouteChangeWhileAsking(t *testing.T) {
	def4 := netip.MustParseAddr("198.18.0.1")
	virt := netip.MustParseAddr("198.18.0.100")
	routes := &fakeRoutes{route: virt, cache: map[netip.Addr]netip.Addr{}}
	r := newRig(t, rigOptions{wgEP: "127.0.0.1:2", source: routes})
	fp := r.fp()
	routes.asking = func() { routes.change(def4) }
	r.dev.reroute(peerEndpoint{fp, fp.Endpoint.Load()}, def4, netip.Addr{})
	if ep := fp.Endpoint.Load(); ep.Src != def4 || !ep.Routed {
		t.Errorf("endpoint = %+v, want the answer of after the change, %v", ep, def4)
	}
	if got := routes.asked(); got != 2 {
		t.Errorf("%d questions, want 2 (the second after the change)", got)
	}
}
