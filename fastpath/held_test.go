package fastpath

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// TestRemovedPeerHeldFreed: packets held for a peer that is then removed
// are freed at the worker's next turn (counted peer_removed), the queue's
// held count goes back to 0, and a batch still carrying the removed peer
// holds nothing more for it.
func TestRemovedPeerHeldFreed(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	hold := func(n int) {
		var frames []dataplane.Frame
		for i := range n {
			frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), 40)))
		}
		for len(frames) > 0 {
			k := min(len(frames), 64)
			sendAll(t, r.hostA, 0, frames[:k])
			frames = frames[k:]
			r.a.workers[0].outbound(r.clock.Now())
		}
	}
	hold(MaxHeldPerPeer)
	wa := r.a.workers[0]
	if s := r.a.Stats()[0]; s.Held != MaxHeldPerPeer {
		t.Fatalf("held = %d, want %d", s.Held, MaxHeldPerPeer)
	}
	r.peerAB.Removed.Store(true)
	wa.flushHeld(r.clock.Now())
	s := r.a.Stats()[0]
	if s.Held != 0 || s.Drops[DropPeerRemoved] != MaxHeldPerPeer {
		t.Errorf("after removal: held = %d, peer_removed = %d; want 0 and %d", s.Held, s.Drops[DropPeerRemoved], MaxHeldPerPeer)
	}
	if len(wa.heldPeers) != 0 || wa.heldTotal != 0 {
		t.Errorf("worker still tracks %d held frames of %d peers", wa.heldTotal, len(wa.heldPeers))
	}
	// The snapshot still routes to the peer (SetPeers not called yet).
	hold(5)
	if s := r.a.Stats()[0]; s.Held != 0 || s.Drops[DropPeerRemoved] != MaxHeldPerPeer+5 {
		t.Errorf("packets for a removed peer: held = %d, peer_removed = %d; want 0 and %d", s.Held, s.Drops[DropPeerRemoved], MaxHeldPerPeer+5)
	}
}
