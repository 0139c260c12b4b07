package fastpath

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// TestHeldOwnOverflowCountedOnce: a packet that finds the queue's budget
// (MaxHeldPerQueue) full drops the oldest of its own peer's one held
// packet and takes its place: the peer stays listed once and counted
// holding once. It was listed again, and counted once more in
// Peer.Holding, for every such packet (50 entries, holding 50), so that
// Holding stayed true after its packets left, and the control plane
// resolved its next hop once a second for good (needNeighbour) and
// skipped the initiator's confirming keepalive.
func TestHeldOwnOverflowCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys bool // held for the MAC (a session), else for a session
	}{{"for a session", false}, {"for the MAC", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{noKeys: !tc.keys})
			ep := *r.peerAB.Endpoint.Load()
			if tc.keys {
				noMAC := ep
				noMAC.DstMAC = [6]byte{}
				r.peerAB.Endpoint.Store(&noMAC)
			}
			r.a.cfg.MaxHeldPerQueue = 1
			tx := r.hostA.Queue(0).TX()
			wa := r.a.workers[0]
			for i := range 50 {
				sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), 40))})
				wa.outbound(r.clock.Now())
				wa.flushHeld(r.clock.Now())
			}
			s := r.a.Stats()[0]
			if s.Held != 1 || s.Drops[DropHeldOverflow] != 49 || len(wa.heldPeers) != 1 || r.peerAB.holding.Load() != 1 {
				t.Fatalf("held %d, held_overflow %d, %d held-peers entries, holding %d; want 1, 49, 1, 1",
					s.Held, s.Drops[DropHeldOverflow], len(wa.heldPeers), r.peerAB.holding.Load())
			}
			if !tc.keys {
				r.installKeys()
			}
			r.peerAB.Endpoint.Store(&ep)
			wa.flushHeld(r.clock.Now())
			if s := r.a.Stats()[0]; s.Held != 0 || r.peerAB.Holding() {
				t.Errorf("after the packet left: held %d, Holding %v (holding %d); want 0, false", s.Held, r.peerAB.Holding(), r.peerAB.holding.Load())
			}
		})
	}
}

// TestHeldForSessionThenMACAsks: packets held for a session (the endpoint
// had its MAC then, so nothing raised NeedNeighbour) that, once the
// session came, wait for a MAC the endpoint has no longer (the control
// plane stored the handshake's endpoint without one: its route moved to
// a next hop not resolved yet) raise NeedNeighbour at the worker's next
// turn, so that the control plane resolves it while they wait. Nothing
// asked before: the next hop's answer was not taken, and they were
// dropped as no_neighbour after 3 s.
func TestHeldForSessionThenMACAsks(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	wa := r.a.workers[0]
	sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	wa.outbound(r.clock.Now())
	if r.peerAB.NeedNeighbour.Load() || !r.peerAB.Holding() {
		t.Fatalf("NeedNeighbour %v, Holding %v; want false, true", r.peerAB.NeedNeighbour.Load(), r.peerAB.Holding())
	}
	noMAC := *r.peerAB.Endpoint.Load()
	noMAC.DstMAC = [6]byte{}
	r.installKeys()
	r.peerAB.Endpoint.Store(&noMAC)
	r.clock.Advance(100 * time.Millisecond)
	wa.flushHeld(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 1 || !r.peerAB.NeedNeighbour.Load() {
		t.Errorf("held %d, NeedNeighbour %v once the session came without the MAC; want 1, true", s.Held, r.peerAB.NeedNeighbour.Load())
	}
}

// TestHeldForMACStampedSent: a packet held for the endpoint's next hop's
// MAC alone counts as sent for the peer's timers when it is held, as wg0
// sent it into the neighbour entry then: no passive keepalive falls due
// while it waits, and the new-handshake timer starts from it. It counted
// only when its 3 s were over, and a keepalive due meanwhile left.
func TestHeldForMACStampedSent(t *testing.T) {
	r, _, _ := holdForMAC(t)
	held := r.clock.Now()
	r.clock.Advance(time.Second)
	wa := r.a.workers[0]
	wa.publish(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 1 {
		t.Fatalf("held %d, want 1", s.Held)
	}
	if got := r.peerAB.Stamps.LastSent.Load(); got != held {
		t.Errorf("LastSent %d, want the hold's %d", got, held)
	}
	if got := r.peerAB.Stamps.LastDataSent.Load(); got != held {
		t.Errorf("LastDataSent %d, want the hold's %d", got, held)
	}
}
