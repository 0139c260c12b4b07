package fastpath

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

// TestHeldForNeighbourSessionExpires: packets held only for the endpoint's
// next hop's MAC (the keypair usable, so no handshake asked for) whose
// keypair then expires (Reject-After-Time) while they wait, with no new
// packet for the peer: the worker asks for a handshake then, once, as it
// would for a packet held without a keypair. Without it nothing asked for
// one, and the packets waited for the zeroing of the keys (up to
// 3 × Reject-After-Time after the session began) to be dropped, even
// when the MAC came meanwhile.
func TestHeldForNeighbourSessionExpires(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	wa := r.a.workers[0]
	ep := *r.peerAB.Endpoint.Load()
	noMAC := ep
	noMAC.DstMAC = [6]byte{}
	r.peerAB.Endpoint.Store(&noMAC)
	sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	wa.outbound(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 1 || r.peerAB.HandshakeNeeded.Load() {
		t.Fatalf("held = %d, HandshakeNeeded %v; want 1, false", s.Held, r.peerAB.HandshakeNeeded.Load())
	}
	wa.flushHeld(r.clock.Now())
	if r.peerAB.HandshakeNeeded.Load() {
		t.Fatal("HandshakeNeeded raised while the keypair is usable")
	}
	r.clock.Advance(protocol.RejectAfterTime + time.Second)
	r.peerAB.Endpoint.Store(&ep) // the MAC came, the session is gone
	wa.flushHeld(r.clock.Now())
	if !r.peerAB.HandshakeNeeded.Load() {
		t.Fatal("packets held for a peer whose keypair expired, and no handshake asked for")
	}
	r.peerAB.HandshakeNeeded.Store(false) // the control plane started one
	wa.flushHeld(r.clock.Now())
	if r.peerAB.HandshakeNeeded.Load() {
		t.Error("HandshakeNeeded raised again by the next flush: once per wait")
	}
	if s := r.a.Stats()[0]; s.Held != 1 {
		t.Errorf("held = %d, want 1 (waiting for the new session)", s.Held)
	}
	// A new session comes, but the MAC goes again before the packet
	// leaves; that session expires too: asked again.
	r.installKeys()
	r.peerAB.Endpoint.Store(&noMAC)
	wa.flushHeld(r.clock.Now())
	r.clock.Advance(protocol.RejectAfterTime + time.Second)
	wa.flushHeld(r.clock.Now())
	if !r.peerAB.HandshakeNeeded.Load() {
		t.Error("a second session expired under the held packets, and no handshake asked for")
	}
}
