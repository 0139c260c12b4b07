package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestSetWANLive: the listen port moves while the engines run. What A sends
// leaves from the new port (peers with SrcPortBase 0 follow it), datagrams
// to the new port are A's, and those to the old port are not (not_for_us).
func TestSetWANLive(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.peerAB.SrcPortBase = 0 // follows A's listen port
	r.a.Start()
	r.b.Start()
	send := func(from, to *rigHost, n int) int {
		t.Helper()
		var frames []dataplane.Frame
		for i := range n {
			frames = append(frames, udpFrame(t, from.port.Queue(0).TX(), from.gw.MAC(), from.port.MAC(), from.addr, to.addr, 1000, 2000, seqPayload(uint32(i), 64)))
		}
		sendAll(t, from.port, 0, frames)
		return recvAll(t, to.port, n, 3*time.Second, nil)
	}
	a := &rigHost{port: r.hostA, gw: r.lanA, addr: hostAddrA}
	b := &rigHost{port: r.hostB, gw: r.lanB, addr: hostAddrB}
	if got := send(a, b, 10); got != 10 {
		t.Fatalf("before the change A→B: %d of 10", got)
	}
	// A publish interval passes at B: roaming looks at one interval's
	// sources at a time, so B must have published the old port's interval
	// (a turn that began after the clock moved) before A's new port is
	// seen, or B saw its current endpoint in the same interval and stays.
	r.clock.Advance(PublishInterval)
	waitTurns(t, r.b)
	const newPort = portA + 100
	if err := r.a.SetWAN(newPort, wanAddrA, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := r.a.WAN(); p != newPort {
		t.Fatalf("WAN() port = %d, want %d", p, newPort)
	}
	// A's workers load the port once per loop turn (SetWAN kicks them).
	waitTurns(t, r.a)
	// B still sends to the old port: not A's any more.
	before := TotalDrops(r.a.Stats())[DropNotForUs]
	if got := send(b, a, 5); got != 0 {
		t.Errorf("B→A to the old port: %d of 5 delivered, want 0", got)
	}
	if d := TotalDrops(r.a.Stats())[DropNotForUs] - before; d != 5 {
		t.Errorf("not_for_us after the move = +%d, want +5", d)
	}
	// A sends from the new port: B roams to it and answers there.
	if got := send(a, b, 10); got != 10 {
		t.Fatalf("after the change A→B: %d of 10", got)
	}
	// Roaming is applied at B's publish: the turn after the clock moved.
	r.clock.Advance(PublishInterval)
	waitTurns(t, r.b)
	if ep := r.peerBA.Endpoint.Load(); ep.Dst.Port() != newPort {
		t.Fatalf("B's endpoint for A = %v, want port %d (A sends from it); B last received %d, now %d; B drops %v", ep.Dst, newPort, r.peerBA.Stamps.LastReceived.Load(), r.clock.Now(), TotalDrops(r.b.Stats()))
	}
	if got := send(b, a, 10); got != 10 {
		t.Errorf("B→A to the new port: %d of 10 delivered", got)
	}
}

type rigHost struct {
	port, gw *memport.Port
	addr     netip.Addr
}

// waitTurns waits until every worker of e has run a whole loop turn that
// began after the call (the worker's published turn state, retire.go): what
// the caller changed before (the clock, the WAN) has been seen by a turn that
// also ran its publish check. It reads every worker's turn state and only
// then kicks the engine: a kick before the read could let the kicked turn
// end, and the worker park, before the read, which would then wait for a
// turn that nothing starts (CI saw it under -race). The bound only ends a
// test whose workers hang.
func waitTurns(t testing.TB, e *Engine) {
	t.Helper()
	done := make([]uint64, len(e.workers))
	for i, w := range e.workers {
		// A turn numbered above the state now begins after it; the state
		// turn|1 (parked) or a later turn says that turn ended.
		done[i] = w.quiet.v.Load()&^1 + 3
	}
	e.Kick()
	deadline := time.Now().Add(30 * time.Second)
	for i, w := range e.workers {
		for w.quiet.v.Load() < done[i] {
			if time.Now().After(deadline) {
				t.Fatalf("worker %d ran no whole turn in 30 s", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}
