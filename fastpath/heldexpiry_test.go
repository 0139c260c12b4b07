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
	r, ep, noMAC := holdForMAC(t)
	wa := r.a.workers[0]
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

// TestHeldForMACExpires: packets held for the endpoint's next hop's MAC
// alone (a usable keypair) are dropped once they waited neighbourWaitMax,
// as Linux drops the queue of a neighbour entry whose resolution failed:
// no_neighbour with a route toward the endpoint (counted in the peer's
// tx_bytes as the sealed messages wg0's socket took), no_wan_route
// without one (not counted). A wait for a session does not count toward
// it, and the next packet held after an expiry waits anew, then leaves
// when the MAC comes.
func TestHeldForMACExpires(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route bool
		want  DropReason
	}{
		{"route, no answer", true, DropNoNeighbour},
		{"no route", false, DropNoWANRoute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{noKeys: true})
			r.a.cfg.WANResolver = unresolvedRoutes{unresolved{route: tc.route}} // the workers are driven by hand
			tx := r.hostA.Queue(0).TX()
			wa := r.a.workers[0]
			wa.publish(r.clock.Now())
			tx0 := r.peerAB.TxBytes.Load()
			hold := func(sizes ...int) {
				t.Helper()
				var frames []dataplane.Frame
				for i, n := range sizes {
					frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), n)))
				}
				sendAll(t, r.hostA, 0, frames)
				wa.outbound(r.clock.Now())
			}
			held := func() uint64 { t.Helper(); return r.a.Stats()[0].Held }
			// Held for a session first, 5 s: no ARP/NDP wait yet.
			hold(40, 41)
			r.clock.Advance(5 * time.Second)
			wa.flushHeld(r.clock.Now())
			ep := *r.peerAB.Endpoint.Load()
			noMAC := ep
			noMAC.DstMAC = [6]byte{}
			r.installKeys()
			r.peerAB.Endpoint.Store(&noMAC)
			wa.flushHeld(r.clock.Now())
			if held() != 2 {
				t.Fatalf("held = %d once the session came without the MAC, want 2 (a wait for a session is no ARP wait)", held())
			}
			hold(1387) // 1,415 bytes: padded to the MTU (1,420), not to 1,424
			r.clock.Advance(neighbourWaitMax - 100*time.Millisecond)
			wa.flushHeld(r.clock.Now())
			if held() != 3 {
				t.Fatalf("held = %d before 3 s of waiting for the MAC, want 3", held())
			}
			r.clock.Advance(200 * time.Millisecond)
			wa.flushHeld(r.clock.Now())
			d := r.a.Stats()[0].Drops
			if held() != 0 || d[tc.want] != 3 || d[DropNoWANRoute]+d[DropNoNeighbour] != 3 || r.peerAB.Holding() || len(wa.heldPeers) != 0 {
				t.Fatalf("after 3 s: held %d, no_neighbour %d, no_wan_route %d, Holding %v; want 0 and 3 %v",
					held(), d[DropNoNeighbour], d[DropNoWANRoute], r.peerAB.Holding(), tc.want)
			}
			wa.publish(r.clock.Now())
			// Sealed: 16 + 16 bytes around the inner packet (28 bytes of
			// headers and the payload) padded to 16, but not past the
			// MTU: 68 and 69 bytes take 80 each, 1,415 take 1,420.
			var want uint64
			if tc.route {
				want = 32 + 80 + 32 + 80 + 32 + 1420
			}
			if got := r.peerAB.TxBytes.Load() - tx0; got != want {
				t.Errorf("tx_bytes grew by %d, want %d", got, want)
			}
			// Sent, for the peer's timers, at the expiry (wg0's
			// wg_packet_create_data_done): any authenticated packet
			// either way, data only into a neighbour entry.
			expired := r.clock.Now()
			if got := r.peerAB.Stamps.LastSent.Load(); got != expired {
				t.Errorf("LastSent %d, want the expiry's %d", got, expired)
			}
			if got := r.peerAB.Stamps.LastDataSent.Load(); (got == expired) != tc.route {
				t.Errorf("LastDataSent %d (the expiry %d): stamped %v, want %v", got, expired, got == expired, tc.route)
			}
			// The next packet waits anew, and leaves with the MAC.
			hold(40)
			r.clock.Advance(neighbourWaitMax - 100*time.Millisecond)
			wa.flushHeld(r.clock.Now())
			if held() != 1 {
				t.Fatalf("held = %d for the next packet, want 1: a new wait", held())
			}
			r.peerAB.Endpoint.Store(&ep)
			wa.flushHeld(r.clock.Now())
			if s := r.a.Stats()[0]; s.Held != 0 || s.Encrypted != 1 {
				t.Errorf("after the MAC came: held %d, encrypted %d; want 0 1", s.Held, s.Encrypted)
			}
		})
	}
}

// TestHeldForMACStaleEntry: a peer listed twice among the held peers (its
// list emptied and held for again within one turn of the worker: the
// first entry outlived the list it was made for) expires by the later
// entry's wait, not by the stale one's start.
func TestHeldForMACStaleEntry(t *testing.T) {
	r, _, _ := holdForMAC(t)
	wa := r.a.workers[0]
	if len(wa.heldPeers) != 1 {
		t.Fatalf("%d held peers listed, want 1", len(wa.heldPeers))
	}
	r.clock.Advance(neighbourWaitMax + time.Second)
	wa.heldPeers = append(wa.heldPeers, heldPeer{id: wa.heldPeers[0].id, since: r.clock.Now()})
	wa.flushHeld(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 1 || len(wa.heldPeers) != 1 {
		t.Fatalf("held %d (%d entries) after the stale entry's 4 s: want 1 (1), the later entry's wait just begun", s.Held, len(wa.heldPeers))
	}
	r.clock.Advance(neighbourWaitMax + time.Millisecond)
	wa.flushHeld(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 0 || s.Drops[DropNoNeighbour] != 1 {
		t.Errorf("after the later entry's 3 s: held %d, no_neighbour %d; want 0 1", s.Held, s.Drops[DropNoNeighbour])
	}
}

// holdForMAC returns a rig whose worker 0 holds one packet for peerAB,
// whose endpoint ep (returned) was replaced by noMAC, the same without its
// next hop's MAC, while its keypair is usable.
func holdForMAC(t *testing.T) (r *rig, ep, noMAC Endpoint) {
	t.Helper()
	r = newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	ep = *r.peerAB.Endpoint.Load()
	noMAC = ep
	noMAC.DstMAC = [6]byte{}
	r.peerAB.Endpoint.Store(&noMAC)
	sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	r.a.workers[0].outbound(r.clock.Now())
	return r, ep, noMAC
}

// TestHeldOverflowForMACCounted: the packets a peer's full held list (128)
// drops while they wait for the endpoint's next hop's MAC alone, with a
// route, count in its tx_bytes as sealed messages, as those that expire
// do: wg0 sent each into the neighbour entry, whose full queue then
// dropped the oldest. Held for a session, or with no route toward the
// endpoint, they were never sent: held_overflow alone.
func TestHeldOverflowForMACCounted(t *testing.T) {
	const extra = 5
	for _, tc := range []struct {
		name         string
		session      bool // a usable keypair
		route, count bool
	}{
		{"MAC, route", true, true, true},
		{"MAC, no route", true, false, false},
		{"session", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{noKeys: !tc.session})
			r.a.cfg.WANResolver = unresolvedRoutes{unresolved{route: tc.route}}
			noMAC := *r.peerAB.Endpoint.Load()
			noMAC.DstMAC = [6]byte{}
			r.peerAB.Endpoint.Store(&noMAC)
			tx := r.hostA.Queue(0).TX()
			wa := r.a.workers[0]
			wa.publish(r.clock.Now())
			tx0 := r.peerAB.TxBytes.Load()
			for sent := 0; sent < MaxHeldPerPeer+extra; sent += 10 {
				var frames []dataplane.Frame
				for i := range 10 {
					frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(sent+i), 40+(sent+i)%3)))
				}
				sendAll(t, r.hostA, 0, frames)
				wa.outbound(r.clock.Now())
			}
			total := (MaxHeldPerPeer + extra + 9) / 10 * 10
			s := r.a.Stats()[0]
			if s.Held != MaxHeldPerPeer || s.Drops[DropHeldOverflow] != uint64(total-MaxHeldPerPeer) {
				t.Fatalf("held %d, held_overflow %d; want %d, %d", s.Held, s.Drops[DropHeldOverflow], MaxHeldPerPeer, total-MaxHeldPerPeer)
			}
			wa.publish(r.clock.Now())
			// 68 to 70 bytes of inner packet: 80 sealed + 32 of header
			// and tag, each.
			var want uint64
			if tc.count {
				want = uint64(total-MaxHeldPerPeer) * (32 + 80)
			}
			if got := r.peerAB.TxBytes.Load() - tx0; got != want {
				t.Errorf("tx_bytes grew by %d for %d dropped as held_overflow, want %d", got, total-MaxHeldPerPeer, want)
			}
			if got := r.peerAB.Stamps.LastDataSent.Load(); (got == r.clock.Now()) != tc.count {
				t.Errorf("LastDataSent %d (now %d): stamped %v, want %v (as sent into the neighbour entry)", got, r.clock.Now(), got == r.clock.Now(), tc.count)
			}
		})
	}
}
