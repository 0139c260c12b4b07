package fastpath

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// TestHoldWakesControl: the first packet held for a peer without a
// session wakes the control plane (ControlWake), so that its initiation
// does not wait for the next tick; the packets after it, while
// HandshakeNeeded stays set, do not wake it again, nor do those held
// after a tick cleared the flag while the first ones still wait (the
// handshake is in flight: each tick clears it, and a wake per raise made a
// flood tick every millisecond, gateway/fastgw's TestFloodUnansweredTicks);
// once the held packets went (the control plane gave up: FlushHeld), the
// next held packet wakes it again. A packet held for an endpoint's next
// hop alone (NeedNeighbour) wakes it too.
func TestHoldWakesControl(t *testing.T) {
	woken := func(e *Engine) bool {
		select {
		case <-e.ControlWake():
			return true
		default:
			return false
		}
	}
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	send := func(seq uint32) {
		sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(seq, 40))})
		r.a.workers[0].outbound(r.clock.Now())
	}
	if woken(r.a) {
		t.Fatal("woken before any packet")
	}
	send(1)
	if !woken(r.a) || !r.peerAB.HandshakeNeeded.Load() {
		t.Fatalf("first held packet: woken false or HandshakeNeeded %v, want both", r.peerAB.HandshakeNeeded.Load())
	}
	send(2)
	if woken(r.a) {
		t.Error("woken again by a second packet while HandshakeNeeded stayed set")
	}
	r.peerAB.HandshakeNeeded.Store(false) // a tick took it: in flight
	send(3)
	if woken(r.a) {
		t.Error("woken by a packet held while the first ones wait for the handshake in flight")
	}
	if !r.peerAB.HandshakeNeeded.Load() {
		t.Error("HandshakeNeeded not raised again by a packet held after a tick took it")
	}
	if s := r.a.Stats()[0]; s.Held != 3 {
		t.Errorf("held = %d, want 3", s.Held)
	}
	r.peerAB.HandshakeNeeded.Store(false)
	r.peerAB.FlushHeld.Store(true) // the control plane gave up
	r.a.workers[0].flushHeld(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 0 {
		t.Fatalf("held = %d after the give-up, want 0", s.Held)
	}
	send(4)
	if !woken(r.a) {
		t.Error("not woken by the first packet held after the give-up")
	}

	r2 := newRig(t, rigConfig{})
	tx2 := r2.hostA.Queue(0).TX()
	ep := *r2.peerAB.Endpoint.Load()
	ep.DstMAC = [6]byte{}
	r2.peerAB.Endpoint.Store(&ep)
	sendAll(t, r2.hostA, 0, []dataplane.Frame{udpFrame(t, tx2, r2.lanA.MAC(), r2.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	r2.a.workers[0].outbound(r2.clock.Now())
	if !woken(r2.a) || !r2.peerAB.NeedNeighbour.Load() {
		t.Errorf("packet held for the next hop's MAC: woken false or NeedNeighbour %v, want both", r2.peerAB.NeedNeighbour.Load())
	}
}
