package fastpath

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestIndexTableGrows allocates more indexes than the initial table holds,
// with a reader looking every published one up all along (run with -race):
// the table doubles as it fills, every index keeps naming its keypair across
// each doubling, a freed one names nothing, and the reader never finds a
// keypair under another index.
func TestIndexTableGrows(t *testing.T) {
	const n = 5 << IndexTableBits // several doublings
	var tab IndexTable
	if tab.Lookup(1) != nil || tab.Slots() != 0 {
		t.Fatalf("empty table: Lookup(1) or Slots() not zero")
	}
	kps := make([]*Keypair, n)
	var published atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var wrong atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			m := int(published.Load())
			for i := 0; i < m; i += 7 {
				kp := kps[i]
				if got := tab.Lookup(kp.LocalIndex); got != kp {
					wrong.Add(1)
				}
			}
		}
	})
	for i := range kps {
		idx, err := tab.Allocate()
		if err != nil {
			t.Fatalf("Allocate #%d: %v", i, err)
		}
		kps[i] = &Keypair{LocalIndex: idx}
		tab.Publish(idx, kps[i])
		published.Store(int64(i + 1))
	}
	close(stop)
	wg.Wait()
	if w := wrong.Load(); w != 0 {
		t.Errorf("concurrent Lookup of a published index missed %d times", w)
	}
	if got, want := tab.Slots(), 8<<IndexTableBits; got != want {
		t.Errorf("Slots() = %d after %d indexes, want %d", got, n, want)
	}
	if tab.Len() != n {
		t.Errorf("Len() = %d, want %d", tab.Len(), n)
	}
	for i, kp := range kps {
		if got := tab.Lookup(kp.LocalIndex); got != kp {
			t.Fatalf("Lookup(index #%d) = %p, want %p", i, got, kp)
		}
	}
	for _, kp := range kps[:n/2] {
		tab.Free(kp.LocalIndex)
	}
	for i, kp := range kps {
		if got := tab.Lookup(kp.LocalIndex); (got == kp) != (i >= n/2) {
			t.Fatalf("after freeing the first half: Lookup(index #%d) = %p", i, got)
		}
	}
	if tab.Len() != n-n/2 {
		t.Errorf("Len() = %d, want %d", tab.Len(), n-n/2)
	}
}
