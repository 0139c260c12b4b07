package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
)

// TestReceiveWANSessionWorker: transport data that came through the host
// kernel (Engine.ReceiveWAN: a datagram it reassembled from fragments)
// came on no queue of its session's: it is checked against the replay
// window as from no particular queue (replay.AnyQueue), so that it never
// counts as a second queue's, and it is handed to the worker that checked
// the session's whole datagrams, when one has. Before, it went to the
// worker of its source port and was checked as that worker's queue: a peer
// whose large packets came fragmented had the Auto window of each of its
// sessions widened (16 KiB instead of 1 KiB), counted in ReplayWidened. A
// message of no session goes to the worker of the queue named.
func TestReceiveWANSessionWorker(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	_, kb := r.installKeys()
	whole, msgs, qf := captureFlow(t, r, 4, 1000)
	from, to := netip.AddrPortFrom(wanAddrA, portA), netip.AddrPortFrom(wanAddrB, portB)
	drain := func() {
		for _, w := range r.b.workers {
			w.drainMailbox(r.clock.Now())
		}
	}
	widened := func() uint64 {
		st := r.b.Stats()
		return st[0].ReplayWidened + st[1].ReplayWidened
	}
	// The session's first two through the kernel, named by the queue
	// that is not the flow's (their source ports' worker).
	r.b.ReceiveWAN(1-qf, from, to, msgs[0])
	r.b.ReceiveWAN(1-qf, from, to, msgs[1])
	drain()
	// A whole datagram on the flow's queue, then one more through the
	// kernel, named by the other queue: it goes to the flow's worker.
	frames := make([]dataplane.Frame, 1)
	tx := r.wanA.Queue(qf).TX()
	if k := tx.Alloc(frames[:1]); k != 1 {
		t.Fatal("Alloc")
	}
	frames[0].SetLen(len(whole[2]))
	copy(frames[0].Data(), whole[2])
	sendAll(t, r.wanA, qf, frames[:1])
	r.b.workers[qf].inbound(r.clock.Now())
	r.b.ReceiveWAN(1-qf, from, to, msgs[3])
	drain()
	if n := recvAll(t, r.hostB, 4, 100*time.Millisecond, nil); n != 4 {
		t.Fatalf("delivered %d, want 4; drops %v", n, TotalDrops(r.b.Stats()))
	}
	if st := r.b.Stats(); st[qf].FromKernel != 1 || st[1-qf].FromKernel != 2 {
		t.Errorf("FromKernel of the flow's worker %d, of the other %d; want 1, 2 (the last to the flow's worker)", st[qf].FromKernel, st[1-qf].FromKernel)
	}
	if w := widened(); w != 0 || kb.ReplayWide() {
		t.Errorf("ReplayWidened %d, wide %v; want 0, narrow (the session came on one queue)", w, kb.ReplayWide())
	}
	// A message of no session (an unknown receiver index) goes to the
	// worker of the queue named.
	bogus := append([]byte(nil), msgs[0]...)
	bogus[4] ^= 0xff
	r.b.ReceiveWAN(1-qf, from, to, bogus)
	drain()
	if st := r.b.Stats(); st[1-qf].FromKernel != 3 {
		t.Errorf("a message of no session: FromKernel of the worker named = %d, want 3", st[1-qf].FromKernel)
	}
}

// captureFlow has A seal n messages of one flow (inner source port sport)
// and reads them off B's
// WAN: whole frames and their UDP payloads, and qf, the queue memport's RSS
// puts the flow on.
func captureFlow(t *testing.T, r *rig, n int, sport uint16) (whole, msgs [][]byte, qf int) {
	t.Helper()
	frames := make([]dataplane.Frame, n)
	tx := r.hostA.Queue(0).TX()
	for i := range frames {
		frames[i] = udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, sport, 2000, seqPayload(uint32(i), 100))
	}
	tx.Transmit(frames)
	r.a.workers[0].outbound(r.clock.Now())
	qf = -1
	for q := range r.wanB.NumQueues() {
		rx := r.wanB.Queue(q).RX()
		m := rx.Receive(frames)
		for _, f := range frames[:m] {
			var p header.Packet
			if d := f.Data(); header.Parse(d, &p) == header.OK {
				whole = append(whole, append([]byte(nil), d...))
				msgs = append(msgs, append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...))
				qf = q
			}
		}
		rx.Free(frames[:m])
	}
	if len(msgs) != n {
		t.Fatalf("captured %d messages, want %d", len(msgs), n)
	}
	return whole, msgs, qf
}

// TestReassembledAnyQueue: in owned address mode (Config.Reassemble) a
// datagram the worker reassembles from fragments is checked against the
// replay window as from no particular queue (replay.AnyQueue): a NIC
// hashes fragments on their addresses alone, and may put them on another
// queue than the session's whole datagrams (addresses and ports), which
// must not be taken for a second queue's and widen the session's Auto
// window.
func TestReassembledAnyQueue(t *testing.T) {
	r := newRig(t, rigConfig{reassemble: true, queues: 2, srcPorts: 16})
	_, kb := r.installKeys()
	// A flow whose whole datagrams land on another queue than their
	// fragments (memport's RSS: addresses and ports, addresses alone).
	var whole, msgs [][]byte
	qf := -1
	for sport := uint16(1000); sport < 1064 && qf < 0; sport++ {
		w, m, q := captureFlow(t, r, 3, sport)
		frag := outerFragments(t, false, m[0], 9, 96)[0]
		eth := append(make([]byte, 12, 14+len(frag)), 0x08, 0x00)
		if memport.RSSQueue(append(eth, frag...), 2) != q {
			whole, msgs, qf = w, m, q
		}
	}
	if qf < 0 {
		t.Fatal("no flow of 64 lands on another queue than its fragments")
	}
	// The first whole, on its flow's queue: the session's first queue.
	frames := make([]dataplane.Frame, 1)
	if k := r.wanA.Queue(qf).TX().Alloc(frames); k != 1 {
		t.Fatal("Alloc")
	}
	frames[0].SetLen(len(whole[0]))
	copy(frames[0].Data(), whole[0])
	sendAll(t, r.wanA, qf, frames)
	r.b.workers[qf].inbound(r.clock.Now())
	// The next two as fragments, reassembled by the other queue's
	// worker.
	for i, m := range msgs[1:] {
		r.sendWAN(outerFragments(t, false, m, uint32(10+i), 96)...)
	}
	for _, w := range r.b.workers {
		for w.inbound(r.clock.Now()) > 0 {
		}
	}
	if n := recvAll(t, r.hostB, 3, 100*time.Millisecond, nil); n != 3 {
		st, _ := r.b.ReassemblyStats()
		t.Fatalf("delivered %d, want 3; drops %v; reassembly %+v", n, TotalDrops(r.b.Stats()), st)
	}
	st := r.b.Stats()
	if w := st[0].ReplayWidened + st[1].ReplayWidened; w != 0 || kb.ReplayWide() {
		t.Errorf("ReplayWidened %d, wide %v; want 0, narrow (the session came on one queue)", w, kb.ReplayWide())
	}
}
