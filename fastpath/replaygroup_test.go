package fastpath

import (
	"math/rand/v2"
	"testing"
)

// TestReplayCheckGrouping drives replayCheck's grouping by keypair
// directly, with its hash table cut to a few sets so that every keypair
// collides with others (linear probing across wrapped ends): bursts from
// many sessions in random order or in runs of one session's frames,
// mostly with each session's next counter (replayRuns' case), and from a
// few sessions interleaved (the table's), unauthenticated frames (no
// keypair) between them, and replays both inside a burst and of earlier
// bursts.
// Every counter of a session must be accepted exactly once, whatever the
// grouping, and the table must be empty after each burst.
func TestReplayCheckGrouping(t *testing.T) {
	r := newRig(t, rigConfig{})
	w := r.b.workers[0]
	n := len(w.meta)
	for _, shift := range []uint8{w.replayShift, 63, 62} { // 63, 62: every hash in 2 or 4 slots
		w.replayShift = shift
		rng := rand.New(rand.NewPCG(uint64(shift), 7))
		kps := replayKeypairs(t, n) // as many sessions as a burst has frames
		seen := map[*Keypair]map[uint64]bool{}
		next := map[*Keypair]uint64{}
		for burst := range 400 {
			sessions := 1 + rng.IntN(n)
			inOrder := burst%2 == 1
			for i := range n {
				w.meta[i].kp = nil
				if rng.IntN(8) == 0 {
					continue // not authenticated
				}
				kp := kps[rng.IntN(sessions)]
				if inOrder && i > 0 && w.meta[i-1].kp != nil && rng.IntN(3) == 0 {
					kp = w.meta[i-1].kp // a run of one session's frames
				}
				w.meta[i].kp = kp
				w.counters[i] = uint64(rng.IntN(400)) // replays, inside the burst and of earlier ones
				if inOrder && rng.IntN(10) != 0 {
					// Mostly each session's next counter, as a
					// concentrator's peers send (replayRuns, and the
					// window's path for the newest counter).
					next[kp] += 1 + uint64(rng.IntN(2))
					w.counters[i] = 400 + next[kp]
				}
			}
			w.replayCheck(n)
			for i := range n {
				kp, c := w.meta[i].kp, w.counters[i]
				if kp == nil {
					if w.accepted[i] {
						t.Fatalf("shift %d burst %d frame %d: accepted without a keypair", shift, burst, i)
					}
					continue
				}
				s := seen[kp]
				if s == nil {
					s = map[uint64]bool{}
					seen[kp] = s
				}
				if want := !s[c]; w.accepted[i] != want {
					t.Fatalf("shift %d burst %d frame %d: counter %d of session %d accepted %v, want %v", shift, burst, i, c, kp.LocalIndex, w.accepted[i], want)
				}
				s[c] = true
			}
			for h, g := range w.replayTab {
				if g != (replayGroup{}) {
					t.Fatalf("shift %d burst %d: table entry %d left %+v", shift, burst, h, g)
				}
			}
		}
	}
}

// replayKeypairs returns n keypairs with zero keys and indexes 0 to n-1,
// each with its own replay window, for tests that drive replayCheck.
func replayKeypairs(t *testing.T, n int) []*Keypair {
	t.Helper()
	kps := make([]*Keypair, n)
	for i := range kps {
		var sk, rk [32]byte
		kp, err := NewKeypair(&sk, &rk, uint32(i), uint32(i), true, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		kps[i] = kp
	}
	return kps
}
