package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// replaceWithNewPeer removes the rig's peer A→B and adds a new one for
// the same prefix, which takes the removed peer's ID at once (the most
// recently freed). It returns the removed peer and the new one, which
// becomes r.peerAB.
func replaceWithNewPeer(t *testing.T, r *rig) (old, nw *Peer) {
	t.Helper()
	old = r.peerAB
	nw = &Peer{SrcPorts: 1, SrcPortBase: portA}
	nw.Endpoint.Store(old.Endpoint.Load())
	old.Removed.Store(true) // as the control plane marks it before UpdatePeers
	err := r.a.UpdatePeers(PeerChange{Remove: []*Peer{old}, Add: []*Peer{nw},
		Routes: []Route{{Prefix: netip.MustParsePrefix("198.19.2.0/24"), Peer: nw}}})
	if err != nil {
		t.Fatal(err)
	}
	if nw.ID != old.ID {
		t.Fatalf("the new peer has ID %d, the removed one %d: the test needs the ID reused", nw.ID, old.ID)
	}
	r.peerAB = nw
	return old, nw
}

// TestRemovedPeerKeepsOffReusedID: what still names a removed peer after
// a new peer took its ID (here a control packet the control plane mailed
// before the removal) does not take the new peer's state in the worker.
// It did: the worker reset the ID's state for the removed peer, and the
// new peer's held packets were dropped as held_overflow, its unpublished
// byte counts lost and the control packet's bytes credited to the removed
// peer.
func TestRemovedPeerKeepsOffReusedID(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	old, nw := replaceWithNewPeer(t, r)
	wa := r.a.workers[0]
	tx := r.hostA.Queue(0).TX()
	var fs []dataplane.Frame
	for i := range 5 {
		fs = append(fs, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), 40)))
	}
	sendAll(t, r.hostA, 0, fs)
	wa.outbound(r.clock.Now())
	if h := r.a.Stats()[0].Held; h != 5 {
		t.Fatalf("held %d for the new peer, want 5", h)
	}
	r.a.Send(0, ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Src: wanAddrA, DstMAC: [6]byte(r.wanB.MAC()),
		Payload: make([]byte, 148), Peer: old})
	wa.drainMailbox(r.clock.Now())
	if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
		t.Fatalf("the removed peer's control packet dropped the new peer's held packets: %v", d.List())
	}
	// A run of the removed peer's frames (a burst of the routes from
	// before the removal) shares one throw-away state: one peer of the
	// burst, not one a frame, and no allocation after the first.
	if g := wa.peerState(old); g != wa.peerState(old) || g.peer != old {
		t.Error("two frames of the removed peer got two states")
	}
	if a := testing.AllocsPerRun(100, func() { wa.peerState(old) }); a != 0 {
		t.Errorf("peerState(removed peer) allocates %v times a frame", a)
	}
	// The new peer's session comes: its held packets leave, and its
	// counters are its own.
	r.installKeys()
	wa.flushHeld(r.clock.Now())
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 5, 100*time.Millisecond, nil); got != 5 {
		t.Fatalf("B delivered %d of the new peer's 5 held packets; drops A %v, B %v", got,
			TotalDrops(r.a.Stats()).List(), TotalDrops(r.b.Stats()).List())
	}
	r.clock.Advance(time.Second)
	wa.publish(r.clock.Now())
	if nw.TxBytes.Load() == 0 || old.TxBytes.Load() != 0 {
		t.Errorf("tx bytes: new peer %d (want its 5 packets'), removed peer %d (want 0)", nw.TxBytes.Load(), old.TxBytes.Load())
	}
}
