package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestReceiveWANSessionWorker: transport data that came through the host
// kernel (Engine.ReceiveWAN: a datagram it reassembled from fragments) is
// handed to the worker that checked its session's counters first, not to
// the worker of the queue ReceiveWAN names (the fast path gateway names
// the datagram's source port), so that it is not taken for a second
// queue's packet: the session's Auto replay window stays narrow. Before,
// a peer whose large packets came fragmented had the window of each of its
// sessions widened (16 KiB instead of 1 KiB), counted in ReplayWidened. A
// message of no session still goes to the worker of queue.
func TestReceiveWANSessionWorker(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	_, kb := r.installKeys()
	// Four messages of one flow, sealed by A and read off B's WAN (both
	// queues: memport's RSS puts the flow on one).
	tmpl := templateFrame(t, r, 100)
	frames := make([]dataplane.Frame, 4)
	tx := r.hostA.Queue(0).TX()
	if k := tx.Alloc(frames); k != 4 {
		t.Fatalf("Alloc %d of 4", k)
	}
	for i := range frames {
		frames[i].SetLen(len(tmpl))
		copy(frames[i].Data(), tmpl)
	}
	tx.Transmit(frames)
	r.a.workers[0].outbound(r.clock.Now())
	var msgs [][]byte
	for q := range 2 {
		rx := r.wanB.Queue(q).RX()
		m := rx.Receive(frames)
		for _, f := range frames[:m] {
			var p header.Packet
			if d := f.Data(); header.Parse(d, &p) == header.OK {
				msgs = append(msgs, append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...))
			}
		}
		rx.Free(frames[:m])
	}
	if len(msgs) != 4 {
		t.Fatalf("captured %d messages, want 4", len(msgs))
	}
	from, to := netip.AddrPortFrom(wanAddrA, portA), netip.AddrPortFrom(wanAddrB, portB)
	drain := func() {
		for _, w := range r.b.workers {
			w.drainMailbox(r.clock.Now())
		}
	}
	// The first through queue 1's worker: the session's first queue.
	r.b.ReceiveWAN(1, from, to, msgs[0])
	drain()
	// The rest named by other queues, as by their source ports.
	for i, m := range msgs[1:] {
		if !r.b.ReceiveWAN(i, from, to, m) {
			t.Fatal("ReceiveWAN: mailbox full")
		}
	}
	drain()
	if n := recvAll(t, r.hostB, 4, 100*time.Millisecond, nil); n != 4 {
		t.Fatalf("delivered %d, want 4; drops %v", n, TotalDrops(r.b.Stats()))
	}
	st := r.b.Stats()
	if st[1].FromKernel != 4 || st[0].FromKernel != 0 {
		t.Errorf("FromKernel by worker %d, %d; want 0, 4 (the session's worker)", st[0].FromKernel, st[1].FromKernel)
	}
	if w := st[0].ReplayWidened + st[1].ReplayWidened; w != 0 || kb.ReplayWide() {
		t.Errorf("ReplayWidened %d, wide %v; want 0, narrow", w, kb.ReplayWide())
	}
	// A message of no session (an unknown receiver index) goes to the
	// worker of the queue named.
	bogus := append([]byte(nil), msgs[0]...)
	bogus[4] ^= 0xff
	r.b.ReceiveWAN(0, from, to, bogus)
	drain()
	if st := r.b.Stats(); st[0].FromKernel != 1 {
		t.Errorf("a message of no session: FromKernel of worker 0 = %d, want 1", st[0].FromKernel)
	}
}
