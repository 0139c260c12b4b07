package fastpath

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReplayRunsConcurrent plays an attacker against two workers (two
// queues) checking bursts of many sessions' runs at once (replayRuns,
// CheckFrom for a lone frame; run it with -race): each frame a session's
// next counter, or a replay of one of its last 50 (seen or not yet seen by
// the other worker), or unauthenticated. No counter of a session may be
// accepted twice, from either queue, before or after its window widened
// (a second queue widens an Auto window), and every counter offered is
// accepted once (all are within the narrow window of the newest).
func TestReplayRunsConcurrent(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	// Workers 0 and 1 of one engine, driven here, not started.
	w0, w1 := r.b.workers[0], r.b.workers[1]
	n := min(len(w0.meta), len(w1.meta))
	const sessions = 80
	kps := replayKeypairs(t, sessions)
	next := make([]atomic.Uint64, sessions)
	type key struct {
		kp int
		c  uint64
	}
	var mu sync.Mutex
	acc := map[key]int{}
	offered := map[key]bool{}
	var wg sync.WaitGroup
	for wi, w := range []*worker{w0, w1} {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wi), 3))
			idx := make([]int, n)
			for burst := range 600 {
				k := 1 + rng.IntN(n)
				for i := range k {
					s := rng.IntN(sessions)
					if i > 0 && rng.IntN(4) == 0 && idx[i-1] >= 0 {
						s = idx[i-1]
					}
					if rng.IntN(10) == 0 {
						s = -1
					}
					idx[i] = s
					if s < 0 {
						w.meta[i].kp = nil
						w.counters[i] = uint64(rng.IntN(100))
						continue
					}
					w.meta[i].kp = kps[s]
					if rng.IntN(3) == 0 || burst == 0 {
						w.counters[i] = next[s].Add(1) - 1
					} else {
						// One load: the other worker may reserve
						// between two, and a second, larger value
						// under the first (cur < 50) wrapped the
						// counter to near 2^64, past the limit.
						cur := next[s].Load()
						w.counters[i] = cur - min(cur, uint64(rng.IntN(50)))
					}
				}
				w.replayCheck(k)
				mu.Lock()
				for i := range k {
					if idx[i] < 0 {
						if w.accepted[i] {
							t.Errorf("accepted without keypair")
						}
						continue
					}
					kk := key{idx[i], w.counters[i]}
					offered[kk] = true
					if w.accepted[i] {
						acc[kk]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for kk, v := range acc {
		if v > 1 {
			t.Fatalf("session %d counter %d accepted %d times", kk.kp, kk.c, v)
		}
	}
	missing := 0
	for kk := range offered {
		if acc[kk] == 0 {
			missing++
		}
	}
	if missing != 0 {
		t.Errorf("%d counters offered never accepted (all are within the narrow window)", missing)
	}
	wide := 0
	for _, kp := range kps {
		if kp.ReplayWide() {
			wide++
		}
	}
	if wide == 0 {
		t.Errorf("no session's window widened: the second queue was not seen")
	}
	t.Logf("%d counters accepted once, %d of %d windows widened", len(acc), wide, sessions)
}
