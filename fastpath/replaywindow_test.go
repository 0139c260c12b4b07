package fastpath

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/replay"
)

// sealedStream has gateway A seal n inner packets of one session, spread
// over many inner flows (so over the outer source ports and B's two WAN
// queues), and returns the sealed frames as bytes by the WAN queue of B
// that memport's RSS delivers each to, in counter order. Inner packet i
// carries i in its first 4 payload bytes.
func sealedStream(t *testing.T, r *rig, n int) [2][][]byte {
	t.Helper()
	var out [2][][]byte
	frames := make([]dataplane.Frame, 64)
	tx := r.hostA.Queue(0).TX()
	for seq := 0; seq < n; {
		m := min(64, n-seq)
		for i := range m {
			f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, uint16(1000+(seq+i)%61), 2000, seqPayload(uint32(seq+i), 16))
			frames[i] = f
		}
		sendAll(t, r.hostA, 0, frames[:m])
		seq += m
		now := r.clock.Now()
		for _, w := range r.a.workers {
			w.outbound(now)
		}
		for q := range 2 {
			rx := r.wanB.Queue(q).RX()
			for {
				k := rx.Receive(frames)
				if k == 0 {
					break
				}
				for _, f := range frames[:k] {
					out[q] = append(out[q], append([]byte(nil), f.Data()...))
				}
				rx.Free(frames[:k])
			}
		}
	}
	if len(out[0])+len(out[1]) != n || len(out[0]) < n/4 || len(out[1]) < n/4 {
		t.Fatalf("sealed %d+%d packets on B's WAN queues, want %d spread over both", len(out[0]), len(out[1]), n)
	}
	return out
}

// deliverStalled feeds the sealed frames back to B's WAN, 64 at a time per
// queue, each batch through the worker of its queue: both queues start
// together, then queue 1 stalls while queue 0 runs stall counters ahead,
// then they take turns. It returns how many distinct inner packets reached
// host B and how many arrived twice.
func deliverStalled(t *testing.T, r *rig, sealed [2][][]byte, stall int, lagFromStart bool) (distinct, dups int) {
	t.Helper()
	seen := map[uint32]bool{}
	frames := make([]dataplane.Frame, 64)
	next := [2]int{}
	feed := func(q int) {
		k := min(64, len(sealed[q])-next[q])
		if k == 0 {
			return
		}
		tx := r.wanA.Queue(q).TX()
		if got := tx.Alloc(frames[:k]); got != k {
			t.Fatalf("Alloc %d of %d", got, k)
		}
		for i := range k {
			d := sealed[q][next[q]+i]
			frames[i].SetLen(len(d))
			copy(frames[i].Data(), d)
		}
		sendAll(t, r.wanA, q, frames[:k])
		next[q] += k
		r.b.workers[q].inbound(r.clock.Now())
		for hq := range 2 {
			rx := r.hostB.Queue(hq).RX()
			for {
				m := rx.Receive(frames)
				if m == 0 {
					break
				}
				for _, f := range frames[:m] {
					seq := binary.BigEndian.Uint32(f.Data()[42:])
					if seen[seq] {
						dups++
					}
					seen[seq] = true
				}
				rx.Free(frames[:m])
			}
		}
	}
	// counter of the next frame of queue q: frames were sealed in counter
	// order, so queue q's i-th frame's counter is its position in the
	// merged order; recover it from the transport header (bytes 16-23 of
	// the UDP payload, little-endian).
	counter := func(q int) uint64 {
		d := sealed[q][min(next[q], len(sealed[q])-1)]
		return binary.LittleEndian.Uint64(d[42+8:])
	}
	feed(0)
	if !lagFromStart {
		feed(1)
	}
	for next[0] < len(sealed[0]) && counter(0) < counter(1)+uint64(stall) {
		feed(0)
	}
	for next[0] < len(sealed[0]) || next[1] < len(sealed[1]) {
		feed(1)
		feed(0)
	}
	return len(seen), dups
}

// TestReplayWindowSeedCase is the seed report's case on memport: one busy
// session spread over 2 queues, one queue stalling 20,000 counters behind
// the other. The Auto window widens (the session is received on a second
// queue) before any loss, and delivers every packet exactly once; the
// kernel's width (Narrow) loses the late queue's packets, which shows the
// case is real.
func TestReplayWindowSeedCase(t *testing.T) {
	const n, stall = 40000, 20000
	for _, tt := range []struct {
		policy   replay.Policy
		wantLoss bool
	}{
		{replay.Auto, false},
		{replay.Narrow, true},
		{replay.Wide, false},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			r := newRig(t, rigConfig{queues: 2, srcPorts: 16, replayWindow: tt.policy, noKeys: true})
			_, kb := r.installKeys()
			sealed := sealedStream(t, r, n)
			distinct, dups := deliverStalled(t, r, sealed, stall, false)
			var replays, widened uint64
			for _, s := range r.b.Stats() {
				replays += s.Drops[DropReplay]
				widened += s.ReplayWidened
			}
			if want := uint64(0); tt.policy == replay.Auto {
				if widened != 1 {
					t.Errorf("ReplayWidened = %d over B's queues, want 1", widened)
				}
			} else if widened != want {
				t.Errorf("ReplayWidened = %d over B's queues, want 0 (%v)", widened, tt.policy)
			}
			t.Logf("%v: %d of %d delivered (queues %d/%d), %d replay drops, wide %v",
				tt.policy, distinct, n, len(sealed[0]), len(sealed[1]), replays, kb.ReplayWide())
			if dups != 0 {
				t.Errorf("%d packets delivered twice", dups)
			}
			if lost := n - distinct; (lost > 0) != tt.wantLoss {
				t.Errorf("%v: lost %d of %d (replay drops %d), want loss %v", tt.policy, lost, n, replays, tt.wantLoss)
			}
			if wantWide := tt.policy != replay.Narrow; kb.ReplayWide() != wantWide {
				t.Errorf("%v: window wide = %v, want %v", tt.policy, kb.ReplayWide(), wantWide)
			}
		})
	}
}

// TestReplayWindowInOrder: a session received in order on one queue keeps
// the narrow window (1 KiB), and the decrypt path allocates nothing per
// batch with the narrow window, nor once it is wide.
func TestReplayWindowInOrder(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	ka, kb := r.installKeys()
	frames := make([]dataplane.Frame, 64)
	tmpl := templateFrame(t, r, 64-42)
	for range 200 { // 12,800 packets in order
		if got := pump(t, r, frames, tmpl, 64); got != 64 {
			t.Fatalf("batch delivered %d of 64; drops B %v", got, r.b.Stats()[0].Drops)
		}
	}
	if kb.ReplayWide() {
		t.Fatalf("in-order session on one queue widened its replay window")
	}
	run := func(name string) {
		allocs := testing.AllocsPerRun(100, func() {
			if got := pump(t, r, frames, tmpl, 64); got != 64 {
				t.Fatalf("batch delivered %d of 64; drops B %v", got, r.b.Stats()[0].Drops)
			}
		})
		if allocs != 0 {
			t.Errorf("AllocsPerRun(encrypt+decrypt batch of 64, %s window) = %v, want 0", name, allocs)
		}
	}
	run("narrow")
	// Widen it as a second queue would: a fresh counter from queue 1, far
	// enough ahead that the runs' counters stay below it (and within the
	// wide window).
	acc := make([]bool, 1)
	if n, widened := kb.checkReplay(1, replay.Auto, []uint64{ka.SendCounter() + 100000}, acc); n != 1 || !widened || !kb.ReplayWide() {
		t.Fatalf("a fresh counter from a second queue did not widen the window")
	}
	run("wide")
}

// TestReplayWindowLagAcrossRekey: a session whose queues lag each other by
// more than the narrow window from its first packet on (the lag outlives
// the session before it: every rekey under a lasting lag) gets the wide
// window from the start when the peer's session before it needed the
// width, and loses nothing. It started narrow, and the lagging queue's
// first packets, too old for it, were rejected and never widened it: the
// queue lost nearly all its packets for the session's life, at every
// rekey.
func TestReplayWindowLagAcrossRekey(t *testing.T) {
	const n, stall = 40000, 20000
	r := newRig(t, rigConfig{queues: 2, srcPorts: 16, replayWindow: replay.Auto, noKeys: true})
	widened := func() (w uint64) {
		for _, s := range r.b.Stats() {
			w += s.ReplayWidened
		}
		return w
	}
	for session := 1; session <= 3; session++ {
		_, kb := r.installKeys()
		lagFromStart := session > 1 // the first widens on its second queue before the lag builds
		distinct, dups := deliverStalled(t, r, sealedStream(t, r, n), stall, lagFromStart)
		if distinct != n || dups != 0 {
			var replays uint64
			for _, s := range r.b.Stats() {
				replays += s.Drops[DropReplay]
			}
			t.Fatalf("session %d: %d of %d delivered, %d twice, %d replay drops", session, distinct, n, dups, replays)
		}
		if !kb.ReplayWide() {
			t.Errorf("session %d: window narrow", session)
		}
		if w := widened(); w != uint64(session) {
			t.Errorf("session %d: ReplayWidened %d over B's queues, want %d (one a session)", session, w, session)
		}
	}
}

// TestReplayWindowWideStartOnce: a session that needed the wide window
// makes the next session start wide, and only the next: sessions after an
// in-order one start narrow again, for the responder (its new session
// waits in Next, the one before it is Current) as for the initiator (its
// new session is Current, the one before it Previous). The responder's
// Previous, two sessions back, made the next two start wide.
func TestReplayWindowWideStartOnce(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2, srcPorts: 16, replayWindow: replay.Auto, noKeys: true})
	const n, stall = 40000, 20000
	_, kb := r.installKeys()
	deliverStalled(t, r, sealedStream(t, r, n), stall, false)
	if !kb.ReplayWide() {
		t.Fatal("the lagging session's window is narrow")
	}
	for session, wantWide := range []bool{true, false, false} {
		_, kb := r.installKeys()
		// In order, on one queue (those of the session's packets that
		// memport's RSS gives B's queue 0; the rest are never sent): the
		// window is made at B's first check and never needs the width.
		in := sealedStream(t, r, 256)[0]
		if got := deliverInOrder(t, r, in); got != len(in) || got == 0 {
			t.Fatalf("session %d: %d of %d delivered; drops B %v", session+2, got, len(in), TotalDrops(r.b.Stats()).List())
		}
		if kb.ReplayWide() != wantWide {
			t.Errorf("session %d after the lagging one: wide %v, want %v", session+2, kb.ReplayWide(), wantWide)
		}
	}
}

// deliverInOrder feeds sealed (frames as bytes) to B's WAN queue 0 in
// bursts of 64, and returns how many packets reached host B.
func deliverInOrder(t *testing.T, r *rig, sealed [][]byte) int {
	t.Helper()
	frames := make([]dataplane.Frame, 64)
	got := 0
	for len(sealed) > 0 {
		k := min(64, len(sealed))
		tx := r.wanA.Queue(0).TX()
		if n := tx.Alloc(frames[:k]); n != k {
			t.Fatalf("Alloc %d of %d", n, k)
		}
		for i, d := range sealed[:k] {
			frames[i].SetLen(len(d))
			copy(frames[i].Data(), d)
		}
		sendAll(t, r.wanA, 0, frames[:k])
		sealed = sealed[k:]
		for r.b.workers[0].inbound(r.clock.Now()) > 0 {
		}
		got += recvAll(t, r.hostB, k, time.Second, nil)
	}
	return got
}
