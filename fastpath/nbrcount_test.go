package fastpath

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// sealed has A seal the packets numbered first up to first+n-1 (orderRig's
// flow) and returns their transport messages as they reached B's WAN,
// without B reading them.
func (o orderRig) sealed(first, n int) [][]byte {
	o.t.Helper()
	o.send(first, n)
	frames := make([]dataplane.Frame, 64)
	rx := o.wanB.Queue(0).RX()
	m := rx.Receive(frames)
	var out [][]byte
	for i := range m {
		var p header.Packet
		d := frames[i].Data()
		if header.Parse(d, &p) != header.OK {
			o.t.Fatal("A sent an unparsable frame")
		}
		out = append(out, append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...))
	}
	rx.Free(frames[:m])
	if len(out) != n {
		o.t.Fatalf("A sealed %d messages, want %d", len(out), n)
	}
	return out
}

// inject hands msgs to B's worker as one burst from A's endpoint.
func (o orderRig) inject(msgs ...[]byte) {
	o.t.Helper()
	var frames []dataplane.Frame
	for _, m := range msgs {
		frames = append(frames, wanFrame(o.t, o.rig, m))
	}
	sendAll(o.t, o.wanA, 0, frames)
	o.b.workers[0].inbound(o.clock.Now())
}

// unresolve makes B's LAN neighbours unknown and returns the function that
// makes them known again.
func (o orderRig) unresolve() (resolve func()) {
	res := o.b.cfg.LANResolver.(*staticResolver)
	res.mu.Lock()
	mac := res.def
	res.def = [6]byte{}
	res.mu.Unlock()
	return func() {
		res.mu.Lock()
		res.def = mac
		res.mu.Unlock()
	}
}

// checkNbrCount checks that the neighbour cache's slots count exactly the
// frames that wait for their address (nbrHold's accounting).
func checkNbrCount(t *testing.T, w *worker) {
	t.Helper()
	n := 0
	for i, e := range w.nbr {
		c := 0
		for _, nw := range w.nbrWait {
			if nw.counted && nw.dst == e.addr {
				c++
			}
		}
		if int(e.waiting) != c {
			t.Errorf("neighbour cache slot %d (%v) counts %d waiting frames, %d wait", i, e.addr, e.waiting, c)
		}
		n += int(e.waiting)
	}
	if n != w.nbrWaitN {
		t.Errorf("nbrWaitN = %d, the slots count %d", w.nbrWaitN, n)
	}
}

// TestNeighbourWaitCountsEveryFrame: every frame that waits for a LAN
// neighbour is counted in its slot, also those that joined a wait already
// begun (in the same burst or a later one).
func TestNeighbourWaitCountsEveryFrame(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{}), t}
	o.unresolve()
	wb := o.b.workers[0]
	o.send(0, 3)
	wb.inbound(o.clock.Now())
	o.send(3, 2)
	wb.inbound(o.clock.Now())
	if len(wb.nbrWait) != 5 {
		t.Fatalf("%d frames wait, want 5", len(wb.nbrWait))
	}
	e := wb.nbr[nbrHash(hostAddrB)&(nbrCacheSize-1)]
	if e.addr != hostAddrB || e.waiting != 5 {
		t.Errorf("slot of %v: %v counts %d waiting frames, want 5", hostAddrB, e.addr, e.waiting)
	}
	checkNbrCount(t, wb)
}

// TestReplayKeepsNeighbourWait: a replay of a packet that waits for its
// LAN neighbour (dropped as a replay, its verdict no-neighbour) does not
// uncount the genuine one, whose successor, once the MAC is known, must
// still leave after it.
func TestReplayKeepsNeighbourWait(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{}), t}
	resolve := o.unresolve()
	msgs := o.sealed(0, 2)
	wb := o.b.workers[0]
	o.inject(msgs[0])
	o.inject(msgs[0]) // an attacker's replay while the genuine one waits
	if d := TotalDrops(o.b.Stats())[DropReplay]; d != 1 {
		t.Errorf("drops[replay] = %d, want 1", d)
	}
	checkNbrCount(t, wb)
	resolve()
	o.inject(msgs[1])
	wb.nbrTried = time.Time{}
	wb.flushNeighbourWait(o.clock.Now())
	got := o.received(2)
	if want := []int{0, 1}; !slices.Equal(got, want) {
		t.Errorf("host B received %v, want %v; drops B %v", got, want, TotalDrops(o.b.Stats()))
	}
	checkNbrCount(t, wb)
}

// TestNeighbourWaitAccountingRandom: bursts from the tunnel toward LAN
// hosts whose MACs come and go (two of them sharing a neighbour cache
// slot), replays of packets that wait, waits that time out and a wait
// list that overflows: after every step the slots count exactly the frames
// that wait, and every packet sent is delivered, dropped and counted, or
// waiting.
func TestNeighbourWaitAccountingRandom(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{}), t}
	o.unresolve()
	res := o.b.cfg.LANResolver.(*staticResolver)
	wb := o.b.workers[0]
	// Three hosts, two of them in one slot.
	var dsts []netip.Addr
	slots := map[uint32]netip.Addr{}
	for i := 2; i < 255 && len(dsts) < 2; i++ {
		a := netip.AddrFrom4([4]byte{198, 19, 2, byte(i)})
		s := nbrHash(a) & (nbrCacheSize - 1)
		if b, ok := slots[s]; ok {
			dsts = []netip.Addr{b, a}
		}
		slots[s] = a
	}
	if len(dsts) != 2 {
		t.Fatal("no two addresses of 198.19.2.0/24 share a slot")
	}
	dsts = append(dsts, hostAddrB)
	macB := [6]byte(o.hostB.MAC())
	rng := rand.New(rand.NewPCG(1, 2))
	tx := o.hostA.Queue(0).TX()
	var last [][]byte // transport messages of the last burst, for replays
	sent, replays, got := 0, 0, 0
	hostRX, buf := o.hostB.Queue(0).RX(), make([]dataplane.Frame, 64)
	drain := func() (n int) {
		for {
			m := hostRX.Receive(buf)
			if m == 0 {
				return n
			}
			hostRX.Free(buf[:m])
			n += m
		}
	}
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 5: // a burst from A toward the LAN hosts
			n := 1 + rng.IntN(12)
			var frames []dataplane.Frame
			for range n {
				d := dsts[rng.IntN(len(dsts))]
				frames = append(frames, udpFrame(t, tx, o.lanA.MAC(), o.hostA.MAC(), hostAddrA, d, 1, 2, seqPayload(uint32(sent), 40)))
				sent++
			}
			sendAll(t, o.hostA, 0, frames)
			o.a.workers[0].outbound(o.clock.Now())
			rx := o.wanB.Queue(0).RX()
			buf := make([]dataplane.Frame, 64)
			m := rx.Receive(buf)
			last = last[:0]
			for i := range m {
				var p header.Packet
				d := buf[i].Data()
				header.Parse(d, &p)
				last = append(last, append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...))
			}
			rx.Free(buf[:m])
			if m != n {
				t.Fatalf("step %d: A sealed %d of %d", step, m, n)
			}
			o.inject(last...)
		case op < 6 && len(last) > 0: // replays of the last burst
			o.inject(last...)
			replays += len(last)
		case op < 8: // a host's MAC comes or goes
			d := dsts[rng.IntN(len(dsts))]
			res.mu.Lock()
			if res.m == nil {
				res.m = map[netip.Addr][6]byte{}
			}
			if _, ok := res.m[d]; ok {
				delete(res.m, d)
			} else {
				res.m[d] = macB
			}
			res.mu.Unlock()
			// The cached MAC of a host that went must not outlive the step
			// (the neighbour cache's TTL, passed without aging the session).
			for i := range wb.nbr {
				wb.nbr[i].expires = 0
			}
		case op < 9: // some waits time out
			for i := range wb.nbrWait {
				if rng.IntN(3) == 0 {
					wb.nbrWait[i].since = time.Now().Add(-neighbourWaitMax - time.Second)
				}
			}
			fallthrough
		default:
			wb.nbrTried = time.Time{}
			wb.flushNeighbourWait(o.clock.Now())
		}
		got += drain()
		checkNbrCount(t, wb)
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
	d := TotalDrops(o.b.Stats())
	if got+int(d[DropNoNeighbour])+len(wb.nbrWait) != sent || int(d[DropReplay]) != replays {
		t.Errorf("sent %d, replayed %d: delivered %d, no_neighbour %d, waiting %d, replay %d; drops %v", sent, replays, got, d[DropNoNeighbour], len(wb.nbrWait), d[DropReplay], d)
	}
	if int(o.b.Stats()[0].Held) != len(wb.nbrWait) {
		t.Errorf("Held = %d, %d wait", o.b.Stats()[0].Held, len(wb.nbrWait))
	}
}

// TestNeighbourWaitFlood: a peer flooding packets toward LAN addresses
// that never resolve fills the wait list (maxNeighbourWait frames) and
// the rest are dropped and counted (no_neighbour); a LAN host whose MAC is
// known is still reached at once, in the same bursts.
func TestNeighbourWaitFlood(t *testing.T) {
	o := orderRig{newRig(t, rigConfig{}), t}
	o.unresolve()
	res := o.b.cfg.LANResolver.(*staticResolver)
	res.mu.Lock()
	res.m = map[netip.Addr][6]byte{hostAddrB: [6]byte(o.hostB.MAC())}
	res.mu.Unlock()
	wb := o.b.workers[0]
	tx := o.hostA.Queue(0).TX()
	const flood = 400
	sent := 0
	for sent < flood {
		var frames []dataplane.Frame
		for i := 0; i < 30 && sent < flood; i++ {
			d := netip.AddrFrom4([4]byte{198, 19, 2, byte(20 + sent%200)})
			frames = append(frames, udpFrame(t, tx, o.lanA.MAC(), o.hostA.MAC(), hostAddrA, d, 1, 2, seqPayload(uint32(sent), 40)))
			sent++
		}
		frames = append(frames, udpFrame(t, tx, o.lanA.MAC(), o.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(1000+sent), 40)))
		sendAll(t, o.hostA, 0, frames)
		o.a.workers[0].outbound(o.clock.Now())
		wb.inbound(o.clock.Now())
	}
	got := o.received((flood + 29) / 30)
	if len(got) != (flood+29)/30 {
		t.Errorf("the known host got %d packets during the flood, want %d", len(got), (flood+29)/30)
	}
	d := TotalDrops(o.b.Stats())
	if len(wb.nbrWait) != maxNeighbourWait || int(d[DropNoNeighbour]) != flood-maxNeighbourWait {
		t.Errorf("%d wait, no_neighbour %d; want %d and %d", len(wb.nbrWait), d[DropNoNeighbour], maxNeighbourWait, flood-maxNeighbourWait)
	}
	checkNbrCount(t, wb)
}
