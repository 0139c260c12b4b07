package fastpath

import (
	"math"
	"testing"
)

// TestSendStamps: a send stamp is exact to the ns from the worker's last
// publish to 2^32-2 ns after it; a time beyond (or before) moves the base
// first, the dirty peers' stamps going to their Peers as they were; a
// publish folds them and clears them.
func TestSendStamps(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	w := r.a.workers[0]
	p, q := &Peer{ID: 20}, &Peer{ID: 21}
	pl, ql := w.peerState(p), w.peerState(q)
	base := int64(7e12)
	w.publish(base)
	if w.stampBase != base {
		t.Fatalf("stampBase %d after a publish at %d", w.stampBase, base)
	}
	for _, d := range []int64{0, 1, 5e9 / 2, math.MaxUint32 - 1} { // the last: 2^32-2
		if s := w.stamp(base + d); w.stampBase != base || w.stampTime(s) != base+d {
			t.Fatalf("stamp at base+%d: %d, time %d, base moved to %d", d, s, w.stampTime(s), w.stampBase)
		}
	}
	// p sent at t1 and (data) t1; q nothing yet.
	t1 := base + 3e9
	st := w.stamp(t1)
	pl.sentAt, pl.dataSentAt = st, st
	w.markDirty(pl)
	// 10 s later: out of range, the base moves and p's stamps go first.
	t2 := t1 + 10e9
	st = w.stamp(t2)
	if w.stampBase != t2 || w.stampTime(st) != t2 {
		t.Fatalf("stamp 10 s on: base %d, time %d, want %d", w.stampBase, w.stampTime(st), t2)
	}
	if got := p.Stamps.LastSent.Load(); got != t1 || p.Stamps.LastDataSent.Load() != t1 {
		t.Fatalf("p's stamps at the move: %d, %d, want %d", got, p.Stamps.LastDataSent.Load(), t1)
	}
	if pl.sentAt != 0 || pl.dataSentAt != 0 {
		t.Fatalf("p's stamps kept after the move: %d, %d", pl.sentAt, pl.dataSentAt)
	}
	ql.sentAt = st
	w.markDirty(ql)
	// Before the base (a clock set back): moves it too.
	t3 := t2 - 1
	if st := w.stamp(t3); w.stampBase != t3 || w.stampTime(st) != t3 {
		t.Fatalf("stamp before the base: base %d, time %d, want %d", w.stampBase, w.stampTime(st), t3)
	}
	if got := q.Stamps.LastSent.Load(); got != t2 {
		t.Fatalf("q's LastSent %d, want %d", got, t2)
	}
	// A publish folds and clears, and the base follows it.
	pl.dataSentAt = w.stamp(t3 + 5)
	w.markDirty(pl)
	w.publish(t3 + 9)
	if got := p.Stamps.LastDataSent.Load(); got != t3+5 || pl.dataSentAt != 0 || w.stampBase != t3+9 {
		t.Fatalf("after publish: LastDataSent %d (want %d), kept %d, base %d", got, t3+5, pl.dataSentAt, w.stampBase)
	}
	if got := p.Stamps.LastSent.Load(); got != t1 {
		t.Fatalf("LastSent %d after a publish without a send stamp, want %d kept", got, t1)
	}
}

// TestTxBytesBounded: a peer's unpublished byte count goes to its Peer
// before it reaches 2^30, and bytes taken back after that (notSent) are
// taken from the Peer's count at the next publish: the total is exact.
func TestTxBytesBounded(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	w := r.a.workers[0]
	p := &Peer{ID: 30}
	pl := w.peerState(p)
	var want int64
	for range 5 {
		addTx(pl, 1<<29-1)
		want += 1<<29 - 1
		if pl.txBytes >= txFlush || pl.txBytes < 0 {
			t.Fatalf("unpublished count %d", pl.txBytes)
		}
	}
	w.markDirty(pl)
	if got := int64(p.TxBytes.Load()) + int64(pl.txBytes); got != want {
		t.Fatalf("published + unpublished %d, want %d", got, want)
	}
	addTx(pl, 1<<29+2) // flushed: reaches 2^30
	want += 1<<29 + 2
	if pl.txBytes != 0 {
		t.Fatalf("count %d after reaching 2^30, want 0 (flushed)", pl.txBytes)
	}
	pl.txBytes -= 4000 // a burst's refused messages, taken back
	want -= 4000
	w.publish(w.stampBase + 1)
	if got := int64(p.TxBytes.Load()); got != want || pl.txBytes != 0 {
		t.Fatalf("TxBytes %d, want %d; unpublished %d", got, want, pl.txBytes)
	}
}
