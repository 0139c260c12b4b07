package fastpath

import (
	"net/netip"
	"testing"
)

// TestHeldOfRemovedPeerIDReused: packets held for a peer (here sent to
// it from another peer, hairpin.go) that is removed, its ID taken at once
// by a new peer (one UAPI set removing one and adding another), and met
// by the worker through the new peer before its turn's flushHeld, are
// freed and counted peer_removed, as flushHeld counts them, not
// held_overflow; the new peer's packet is held for it.
func TestHeldOfRemovedPeerIDReused(t *testing.T) {
	h := newHubRig(t, rigConfig{}, nil, false)
	w := h.b.workers[0]
	for range 3 {
		sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	}
	w.inbound(h.clock.Now())
	if w.heldTotal != 3 {
		t.Fatalf("held %d for C, want 3", w.heldTotal)
	}
	// The control plane's removal (gateway: forgetPeerLocked), then D
	// added with C's networks.
	h.peerC.Removed.Store(true)
	ba := []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")}
	if err := h.b.SetPeers([]*Peer{h.peerBA}, [][]netip.Prefix{ba}); err != nil {
		t.Fatal(err)
	}
	d := &Peer{SrcPorts: 1, SrcPortBase: portB}
	d.Endpoint.Store(h.peerC.Endpoint.Load())
	if err := h.b.SetPeers([]*Peer{h.peerBA, d}, [][]netip.Prefix{ba, pfxC}); err != nil {
		t.Fatal(err)
	}
	if d.ID != h.peerC.ID {
		t.Fatalf("D's ID %d, C's %d: the rig needs the ID reused", d.ID, h.peerC.ID)
	}
	sealToB(t, h.rig, ip4{src: pA, dst: pC}.bytes())
	w.inbound(h.clock.Now())
	s := h.b.Stats()[0]
	if s.Drops[DropPeerRemoved] != 3 || s.Drops[DropHeldOverflow] != 0 {
		t.Errorf("drops %v, want peer_removed=3", s.Drops.List())
	}
	if w.heldTotal != 1 || h.peerC.Holding() || !d.Holding() {
		t.Errorf("held %d, C holding %v, D holding %v; want 1 false true", w.heldTotal, h.peerC.Holding(), d.Holding())
	}
}
