package gateway

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// TestSourceIsAddressReached: a peer whose handshake reached a further
// WAN address (a keepalived virtual address) is answered from it (the
// response, then the keepalives: ControlPacket.Src), its endpoint keeps it
// as Src; SetWANAddrs keeps that Src while the address stays, and moves it
// to the default once the address is gone, as Linux's WireGuard clears an
// endpoint's source that is no longer usable.
func TestSourceIsAddressReached(t *testing.T) {
	def4 := netip.MustParseAddr("198.18.0.1")
	def6 := netip.MustParseAddr("2001:2::1")
	virt := netip.MustParseAddr("198.18.0.100")
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.f.ourDst = netip.AddrPortFrom(virt, 51820)
	fp := r.fp()
	r.establishAsResponder()
	resp := ofType(r.f.sentSince(0), noise.TypeResponse, 0)
	if len(resp) != 1 || resp[0].src != virt {
		t.Fatalf("responses = %v, want one from %v (got %+v)", types(resp), virt, resp)
	}
	if ep := fp.Endpoint.Load(); ep == nil || ep.Src != virt {
		t.Fatalf("endpoint = %+v, want Src %v", ep, virt)
	}
	keepalive := func() sentPacket {
		t.Helper()
		mark := r.f.nsent()
		r.dev.SendKeepalive(r.wgPub)
		ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)
		if len(ka) != 1 {
			t.Fatalf("keepalives sent = %v, want 1", types(r.f.sentSince(mark)))
		}
		return ka[0]
	}
	if ka := keepalive(); ka.src != virt {
		t.Errorf("keepalive from %v, want %v", ka.src, virt)
	}
	r.dev.SetWANAddrs(def4, def6, virt)
	if ep := fp.Endpoint.Load(); ep.Src != virt {
		t.Errorf("Src after SetWANAddrs keeping %v = %v, want it kept", virt, ep.Src)
	}
	r.dev.SetWANAddrs(def4, def6)
	if ep := fp.Endpoint.Load(); ep.Src != def4 {
		t.Errorf("Src after %v left the WAN = %v, want the default %v", virt, ep.Src, def4)
	}
	if ka := keepalive(); ka.src != def4 {
		t.Errorf("keepalive after %v left from %v, want %v", virt, ka.src, def4)
	}
}

// TestSourceOfRoute: a configured endpoint not heard from is sent to
// from the source its route chooses (Options.Source), as Linux's
// WireGuard sends with its route lookup's source: the handshake
// initiation leaves from it; after routes change (RefreshSources) and
// after the WAN's addresses change (SetWANAddrs) it is asked again; an
// answer of another family, or none, gives the default. Once the peer is
// heard from, the endpoint keeps the address its packet reached, whatever
// the route says.
func TestSourceOfRoute(t *testing.T) {
	def4 := netip.MustParseAddr("198.18.0.1")
	def6 := netip.MustParseAddr("2001:2::1")
	virt := netip.MustParseAddr("198.18.0.100")
	var route atomic.Pointer[netip.Addr]
	route.Store(&virt)
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "127.0.0.1:2", source: func(netip.Addr) netip.Addr { return *route.Load() }})
	fp := r.fp()
	if ep := fp.Endpoint.Load(); ep == nil || ep.Src != virt || !ep.Routed {
		t.Fatalf("configured endpoint = %+v, want Src %v, Routed", ep, virt)
	}
	for _, c := range []struct {
		route, want netip.Addr
		refresh     func()
	}{
		{def4, def4, r.dev.RefreshSources},
		{virt, virt, func() { r.dev.SetWANAddrs(def4, def6, virt) }},
		{netip.Addr{}, def4, r.dev.RefreshSources},
		{def6, def4, r.dev.RefreshSources},
		{virt, virt, r.dev.RefreshSources},
	} {
		route.Store(&c.route)
		c.refresh()
		if ep := fp.Endpoint.Load(); ep.Src != c.want || !ep.Routed {
			t.Errorf("route's source %v: endpoint %+v, want Src %v, Routed", c.route, ep, c.want)
		}
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
	r.dev.RefreshSources()
	r.dev.SetWANAddrs(def4, def6, virt)
	if ep := fp.Endpoint.Load(); ep.Src != def4 || ep.Routed {
		t.Errorf("endpoint heard from after routes changed = %+v, want Src %v kept", ep, def4)
	}
}
