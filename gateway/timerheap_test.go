package gateway

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTimerHeapModel checks the heap against a plain map of deadlines
// under random schedules, reschedules and removals.
func TestTimerHeapModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	peers := make([]*peer, 200)
	for i := range peers {
		peers[i] = &peer{heapIdx: -1}
	}
	var h timerHeap
	model := map[*peer]int64{}
	now := int64(0)
	for step := range 20000 {
		p := peers[rng.IntN(len(peers))]
		switch rng.IntN(4) {
		case 0, 1:
			due := now + 1 + rng.Int64N(1000)
			h.set(p, due)
			model[p] = due
		case 2:
			h.remove(p)
			delete(model, p)
		case 3:
			now += rng.Int64N(50)
			got := h.popDue(now, nil)
			var want []*peer
			for q, d := range model {
				if d <= now {
					want = append(want, q)
					delete(model, q)
				}
			}
			for i := 1; i < len(got); i++ {
				if got[i].due != 0 || got[i-1].heapIdx != -1 {
					t.Fatalf("step %d: popped peers still marked in the heap", step)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("step %d: popped %d, want %d", step, len(got), len(want))
			}
			for _, q := range want {
				if !slices.Contains(got, q) {
					t.Fatalf("step %d: a due peer was not popped", step)
				}
			}
		}
		if len(h) != len(model) {
			t.Fatalf("step %d: heap holds %d, model %d", step, len(h), len(model))
		}
		for i, q := range h {
			if q.heapIdx != i || model[q] != q.due {
				t.Fatalf("step %d: entry %d: heapIdx %d, due %d, model %d", step, i, q.heapIdx, q.due, model[q])
			}
			if i > 0 && h[(i-1)/2].due > q.due {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
	}
}
