package gateway

import (
	"net/netip"
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
