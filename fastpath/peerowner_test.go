package fastpath_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
)

func newMemEngine(t *testing.T) *fastpath.Engine {
	t.Helper()
	lan, host, err := memport.NewPair(memport.Config{Name: "lan"})
	if err != nil {
		t.Fatal(err)
	}
	wan, far, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := fastpath.New(fastpath.Config{
		LAN: lan, WAN: wan, ListenPort: 51820,
		WANAddr4:    netip.MustParseAddr("198.18.0.1"),
		WANResolver: staticMAC(far.MAC()), LANResolver: staticMAC(host.MAC()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		for _, p := range []*memport.Port{lan, host, wan, far} {
			p.Close()
		}
	})
	return e
}

// TestPeerInOneEngine: a Peer's ID indexes its engine's per-queue arrays,
// so a second engine must not take it while it is in a first one's set.
// Both took it: the second overwrote the ID, so that in the first two
// peers shared an ID (each dropping the other's held packets and
// counters), and the first freed an ID another of its peers still had.
// Removed from the first engine's set, or that engine closed, it may
// join another.
func TestPeerInOneEngine(t *testing.T) {
	a, b := newMemEngine(t), newMemEngine(t)
	pfx := netip.MustParsePrefix("198.19.1.0/24")
	other := &fastpath.Peer{PublicKey: [32]byte{1}}
	p := &fastpath.Peer{PublicKey: [32]byte{2}}
	if err := a.SetPeers([]*fastpath.Peer{other, p}, [][]netip.Prefix{nil, {pfx}}); err != nil {
		t.Fatal(err)
	}
	id := p.ID
	err := b.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{p}})
	if err == nil || !strings.Contains(err.Error(), "another engine") {
		t.Errorf("UpdatePeers of a peer in another engine's set: %v, want an error", err)
	}
	err = b.SetPeers([]*fastpath.Peer{p}, [][]netip.Prefix{nil})
	if err == nil || !strings.Contains(err.Error(), "another engine") {
		t.Errorf("SetPeers of a peer in another engine's set: %v, want an error", err)
	}
	if p.ID != id {
		t.Fatalf("a refused join changed the peer's ID from %d to %d", id, p.ID)
	}
	// Out of a's set, it may join b.
	if err := a.UpdatePeers(fastpath.PeerChange{Remove: []*fastpath.Peer{p}, Routes: []fastpath.Route{{Prefix: pfx}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{p}}); err != nil {
		t.Errorf("a peer removed from a's set: b refused it: %v", err)
	}
	// other may join b once a closed.
	if err := b.SetPeers([]*fastpath.Peer{p, other}, [][]netip.Prefix{nil, nil}); err == nil {
		t.Error("b took a peer of a's set")
	}
	a.Close()
	if err := b.SetPeers([]*fastpath.Peer{p, other}, [][]netip.Prefix{nil, nil}); err != nil {
		t.Errorf("a closed: b refused its peer: %v", err)
	}
}

// TestSetPeersInvalidPrefix: SetPeers refuses an invalid prefix, as
// UpdatePeers does, and changes nothing; it returned nil with the prefix
// silently left out of the table.
func TestSetPeersInvalidPrefix(t *testing.T) {
	e := newMemEngine(t)
	p := &fastpath.Peer{}
	err := e.SetPeers([]*fastpath.Peer{p}, [][]netip.Prefix{{netip.MustParsePrefix("198.19.1.0/24"), {}}})
	if err == nil || !strings.Contains(err.Error(), "invalid prefix") {
		t.Fatalf("SetPeers with an invalid prefix: %v, want an error", err)
	}
	// Nothing changed: p is in no set, so UpdatePeers may add it.
	if err := e.UpdatePeers(fastpath.PeerChange{Add: []*fastpath.Peer{p}}); err != nil {
		t.Errorf("after a refused SetPeers: %v", err)
	}
}
