package fastpath

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/dataplanetest"
	"github.com/wgpio/wgpio/protocol"
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
	if !r.peerAB.Holding() {
		t.Fatalf("Holding() with %d packets held = false, want true", MaxHeldPerPeer)
	}
	r.peerAB.Removed.Store(true)
	wa.flushHeld(r.clock.Now())
	if r.peerAB.Holding() {
		t.Errorf("Holding() after the held packets were dropped = true, want false")
	}
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

// TestWorkersKeepNoZeroedKeypair: after traffic both ways, a keypair the
// control plane takes out of its slots and the index table and zeroes is
// unreachable (collected) although the workers stay idle: no worker keeps
// a reference to it until the peer's next burst.
func TestWorkersKeepNoZeroedKeypair(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	collected := make(chan struct{}, 2)
	func() {
		ka, kb := r.installKeys()
		runtime.AddCleanup(ka, func(struct{}) { collected <- struct{}{} }, struct{}{})
		runtime.AddCleanup(kb, func(struct{}) { collected <- struct{}{} }, struct{}{})
		// A→B (outbound at A, inbound at B), then B→A.
		tx := r.hostA.Queue(0).TX()
		sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
		r.a.workers[0].outbound(r.clock.Now())
		r.b.workers[0].inbound(r.clock.Now())
		if got := recvAll(t, r.hostB, 1, time.Second, nil); got != 1 {
			t.Fatalf("A→B: %d packets arrived, want 1; drops B %v", got, TotalDrops(r.b.Stats()))
		}
		txb := r.hostB.Queue(0).TX()
		sendAll(t, r.hostB, 0, []dataplane.Frame{udpFrame(t, txb, r.lanB.MAC(), r.hostB.MAC(), hostAddrB, hostAddrA, 2, 1, seqPayload(2, 40))})
		r.b.workers[0].outbound(r.clock.Now())
		r.a.workers[0].inbound(r.clock.Now())
		if got := recvAll(t, r.hostA, 1, time.Second, nil); got != 1 {
			t.Fatalf("B→A: %d packets arrived, want 1; drops A %v", got, TotalDrops(r.a.Stats()))
		}
		// The control plane's part: out of the slots and the index
		// table, then zeroed.
		r.peerAB.ClearKeypairs()
		r.peerBA.ClearKeypairs()
		r.a.Indexes().Free(ka.LocalIndex)
		r.b.Indexes().Free(kb.LocalIndex)
		ka.Zero()
		kb.Zero()
	}()
	for i := 0; i < 2; i++ {
		runtime.GC()
		select {
		case <-collected:
		case <-time.After(2 * time.Second):
			t.Fatalf("%d of 2 zeroed keypairs still reachable after GC", i)
		}
	}
}

// TestControlWaitsForNeighbour: a handshake initiation posted while the WAN
// next hop has no MAC yet is held (not dropped as no_neighbour) and leaves,
// with the resolved MAC, as soon as the resolver answers: the first
// handshake does not wait for a retry.
func TestControlWaitsForNeighbour(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	res := r.a.cfg.WANResolver.(*staticResolver)
	wa := r.a.workers[0]
	payload := make([]byte, protocol.InitiationSize)
	payload[0] = protocol.TypeInitiation
	dst := netip.AddrPortFrom(wanAddrB, portB)
	if !r.a.Send(0, ControlPacket{Dst: dst, Payload: payload, Peer: r.peerAB}) {
		t.Fatal("Send refused")
	}
	wa.drainMailbox(r.clock.Now())
	s := r.a.Stats()[0]
	if s.Drops[DropNoNeighbour] != 0 || s.Held != 1 || s.ControlSent != 0 {
		t.Fatalf("unresolved next hop: no_neighbour %d, held %d, control sent %d; want 0, 1, 0", s.Drops[DropNoNeighbour], s.Held, s.ControlSent)
	}
	var mB [6]byte
	copy(mB[:], r.wanB.MAC())
	res.mu.Lock()
	res.m = map[netip.Addr][6]byte{wanAddrB: mB}
	res.mu.Unlock()
	time.Sleep(2 * neighbourRetry)
	wa.flushNeighbourWait(r.clock.Now())
	s = r.a.Stats()[0]
	if s.Held != 0 || s.ControlSent != 1 {
		t.Fatalf("after the neighbour resolved: held %d, control sent %d; want 0, 1", s.Held, s.ControlSent)
	}
	rx := r.wanB.Queue(0).RX()
	var got [4]dataplane.Frame
	n := 0
	for deadline := time.Now().Add(time.Second); n == 0 && time.Now().Before(deadline); {
		n = rx.Receive(got[:])
	}
	if n != 1 {
		t.Fatalf("frames at B's WAN = %d, want the initiation", n)
	}
	defer rx.Free(got[:n])
	d := got[0].Data()
	if !bytes.Equal(d[:6], mB[:]) {
		t.Errorf("initiation's destination MAC = %x, want %x", d[:6], mB)
	}
	if !bytes.HasSuffix(d, payload) {
		t.Errorf("initiation's payload changed")
	}
}

// TestPeerStateStable: a worker's per-peer state does not move when a peer
// with a higher ID shows up later in the same batch (a batch keeps pointers
// to it: frames held through a moved copy were lost, still counted held).
func TestPeerStateStable(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	w := r.a.workers[0]
	p0 := &Peer{ID: 0}
	pl0 := w.peerState(p0)
	pl0.sentAt = 42
	for _, id := range []int{1, 255, 256, 1000, 5000} {
		w.peerState(&Peer{ID: id})
		if got := w.peerState(p0); got != pl0 || got.sentAt != 42 {
			t.Fatalf("after peer ID %d: peer 0's state moved (%p → %p) or changed", id, pl0, got)
		}
	}
}

// TestHoldingUntilSent: Peer.Holding reports held packets from the first
// held until the worker sends them with the keypair that becomes usable (the
// control plane then sends no keepalive of its own after the handshake).
func TestHoldingUntilSent(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	if r.peerAB.Holding() {
		t.Fatal("Holding() before anything was held = true, want false")
	}
	sendAll(t, r.hostA, 0, []dataplane.Frame{
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40)),
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(2, 40)),
	})
	wa := r.a.workers[0]
	wa.outbound(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 2 || !r.peerAB.Holding() {
		t.Fatalf("held = %d, Holding() = %v; want 2, true", s.Held, r.peerAB.Holding())
	}
	r.installKeys()
	wa.flushHeld(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 0 || r.peerAB.Holding() {
		t.Errorf("after the keypair came: held = %d, Holding() = %v; want 0, false", s.Held, r.peerAB.Holding())
	}
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 2, time.Second, nil); got != 2 {
		t.Errorf("held packets delivered = %d, want 2; drops A %v, B %v", got, TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
	}
}

// TestHoldForNeighbourNoHandshake: a packet for a peer whose keypair is
// usable but whose endpoint's next hop has no MAC yet (an endpoint just
// set) is held with NeedNeighbour raised and HandshakeNeeded not: the
// session it has serves once the control plane fills in the MAC, and the
// held packet leaves with it at the next flush. Before, every held packet
// raised HandshakeNeeded, and the control plane started a handshake that
// was not needed. Without a keypair both are raised.
func TestHoldForNeighbourNoHandshake(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	send := func(seq uint32) {
		sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(seq, 40))})
		r.a.workers[0].outbound(r.clock.Now())
	}
	send(1) // B's keypair promoted: the session is usable both ways
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, time.Second, nil); got != 1 {
		t.Fatalf("first packet delivered = %d, want 1", got)
	}
	ep := *r.peerAB.Endpoint.Load()
	noMAC := ep
	noMAC.DstMAC = [6]byte{}
	r.peerAB.Endpoint.Store(&noMAC)
	send(2)
	if s := r.a.Stats()[0]; s.Held != 1 || !r.peerAB.NeedNeighbour.Load() || r.peerAB.HandshakeNeeded.Load() {
		t.Fatalf("held = %d, NeedNeighbour %v, HandshakeNeeded %v; want 1, true, false",
			s.Held, r.peerAB.NeedNeighbour.Load(), r.peerAB.HandshakeNeeded.Load())
	}
	r.peerAB.Endpoint.Store(&ep) // the control plane resolved the MAC
	r.peerAB.NeedNeighbour.Store(false)
	r.a.workers[0].flushHeld(r.clock.Now())
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, time.Second, nil); got != 1 {
		t.Errorf("held packet delivered = %d, want 1; drops A %v, B %v", got, TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
	}
	r.peerAB.Current.Store(nil) // no keypair: a handshake is needed
	send(3)
	if !r.peerAB.HandshakeNeeded.Load() {
		t.Errorf("HandshakeNeeded not raised for a packet held without a keypair")
	}
}

// TestNoWANAddressNotHeld: a packet for a peer whose keypair is usable but
// whose endpoint has no MAC while the WAN has no address of its family
// (the last one was removed, and its connected route with it, so the tick
// took the MAC back: gateway Options.Routed) is dropped as
// no_wan_address, as it is with the MAC known, not held waiting for a
// neighbour that cannot help. Before, such packets were held, and a WAN
// without an address looked like a next hop not answering
// (fastgw TestWANAddressReplaced failed on it).
func TestNoWANAddressNotHeld(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	send := func(seq uint32) {
		sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(seq, 40))})
		r.a.workers[0].outbound(r.clock.Now())
	}
	send(1)
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, time.Second, nil); got != 1 {
		t.Fatalf("first packet delivered = %d, want 1", got)
	}
	// The WAN's last IPv4 address removed: the engine first (SetWAN),
	// the tick takes the MAC (its connected route went with it), and the
	// control plane has not moved the endpoint's Src yet.
	port, _, a6 := r.a.WAN()
	if err := r.a.SetWAN(port, netip.Addr{}, a6); err != nil {
		t.Fatal(err)
	}
	r.a.workers[0].wan = r.a.wan.Load() // as the worker's next turn loads it
	gone := *r.peerAB.Endpoint.Load()
	gone.DstMAC = [6]byte{}
	r.peerAB.Endpoint.Store(&gone)
	send(2)
	s := r.a.Stats()[0]
	if d := TotalDrops(r.a.Stats())[DropNoWANAddress]; d != 1 || s.Held != 0 {
		t.Errorf("no_wan_address = %d, held = %d; want 1, 0", d, s.Held)
	}
}

// TestCloseFreesHeldToTheirPools: Close frees the packets a worker holds
// for a peer without a keypair, and those waiting for a WAN neighbour,
// whatever pool they came from: from the LAN port's RX (the LAN host's
// pool: memport hands frames over), from the LAN TX half's own pool (the
// exception interface's packets, copied into a frame the worker
// allocated) and the WAN TX half's (a control packet). Every buffer of
// every pool is then in exactly one place. A frame freed through another
// half than the one it came from goes back to its own pool
// (dataplane.Cache.FreeFrames), so close's frees through lanTX and wanRX
// lose nothing.
func TestCloseFreesHeldToTheirPools(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	sendAll(t, r.hostA, 0, []dataplane.Frame{
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40)),
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(2, 40)),
	})
	wa := r.a.workers[0]
	now := r.clock.Now()
	wa.outbound(now)
	f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(3, 40))
	r.a.SendTunnel(0, f.Data()[14:])
	tx.Free([]dataplane.Frame{f})
	// A control packet whose WAN next hop does not resolve waits.
	r.a.Send(0, ControlPacket{Dst: netip.MustParseAddrPort("198.18.9.9:51820"), Payload: make([]byte, 32)})
	wa.drainMailbox(now)
	if s := r.a.Stats()[0]; s.Held != 4 {
		t.Fatalf("held = %d, want 4 (3 for the peer, 1 control packet); drops %v", s.Held, TotalDrops(r.a.Stats()))
	}
	r.a.Close()
	r.b.Close()
	if d := TotalDrops(r.a.Stats())[DropClosed]; d != 4 {
		t.Errorf("closed = %d, want 4", d)
	}
	// The gateways' LAN and WAN ports share a pool each: account for all.
	dataplanetest.CheckAccounting(t, r.hostA, r.lanA, r.wanA, r.wanB, r.lanB, r.hostB)
}

// TestFlushReason: packets held for a peer whose FlushHeld a worker saw
// set are counted peer_removed when the peer is removed by then (a
// removal stores Removed, then FlushHeld: flushHeld's earlier look at
// Removed could come between the two), handshake_gave_up otherwise.
func TestFlushReason(t *testing.T) {
	var p Peer
	p.FlushHeld.Store(true)
	if got := flushReason(&p); got != DropHandshakeGaveUp {
		t.Errorf("handshake given up: %v, want handshake_gave_up", got)
	}
	p.Removed.Store(true)
	if got := flushReason(&p); got != DropPeerRemoved {
		t.Errorf("peer removed: %v, want peer_removed", got)
	}
}

// TestHeldBudgetShared: when a queue's held packets reach MaxHeldPerQueue,
// a packet for another peer waiting for its handshake takes the place of
// the oldest packet of the peer that holds the most, where it was dropped:
// peers whose handshakes go unanswered fill the budget but give way, as
// Linux and wireguard-go, which bound each peer's queue alone, hold the
// other peer's first packets.
func TestHeldBudgetShared(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	r.a.cfg.MaxHeldPerQueue = 8
	p2 := &Peer{SrcPorts: 1, SrcPortBase: portA}
	if err := r.a.UpdatePeers(PeerChange{Add: []*Peer{p2}, Routes: []Route{{Prefix: netip.MustParsePrefix("198.19.3.0/24"), Peer: p2}}}); err != nil {
		t.Fatal(err)
	}
	p2.Endpoint.Store(r.peerAB.Endpoint.Load())
	tx := r.hostA.Queue(0).TX()
	var frames []dataplane.Frame
	for i := range 8 {
		frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), 40)))
	}
	for i := range 2 {
		frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, netip.MustParseAddr("198.19.3.5"), 1, 2, seqPayload(uint32(i), 40)))
	}
	sendAll(t, r.hostA, 0, frames)
	wa := r.a.workers[0]
	wa.outbound(r.clock.Now())
	first, second := len(wa.localAt(int(r.peerAB.ID)).held), len(wa.localAt(int(p2.ID)).held)
	if first != 6 || second != 2 {
		t.Errorf("held %d for the first peer and %d for the second, want 6 and 2", first, second)
	}
	if s := r.a.Stats()[0]; s.Held != 8 || s.Drops[DropHeldOverflow] != 2 {
		t.Errorf("held %d, held_overflow %d; want 8 and 2", s.Held, s.Drops[DropHeldOverflow])
	}
}
