package replay

import (
	"math/rand/v2"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// TestReplayAcrossWidening plays an attacker who recorded every
// authenticated packet of a session and sends each one again: before the
// window widens, after it widened (from either cause), from every queue and
// in batches of every shape. Not one replay may be accepted, and the
// legitimate packets around the widening are all accepted but for those
// below the floor, which must be rejected.
func TestReplayAcrossWidening(t *testing.T) {
	const limit = protocol.RejectAfterMessages
	for _, cause := range []string{"queue", "reorder"} {
		t.Run(cause, func(t *testing.T) {
			var w SharedWindow // Auto, as in the fast path
			var seen []uint64  // every counter accepted, in order
			check := func(queue int, cs []uint64) []bool {
				t.Helper()
				acc := make([]bool, len(cs))
				w.CheckBatchFrom(queue, cs, limit, acc)
				for i, ok := range acc {
					if ok {
						seen = append(seen, cs[i])
					}
				}
				return acc
			}
			replayAll := func(when string) {
				t.Helper()
				rng := rand.New(rand.NewPCG(uint64(len(seen)), 19))
				all := append([]uint64(nil), seen...)
				rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				for len(all) > 0 {
					n := min(len(all), 1+rng.IntN(64))
					acc := make([]bool, n)
					if got, widened := w.CheckBatchFrom(rng.IntN(4), all[:n], limit, acc); got != 0 || widened {
						for i, ok := range acc {
							if ok {
								t.Fatalf("%s: replay of %d accepted", when, all[i])
							}
						}
						t.Fatalf("%s: a batch of replays widened the window", when)
					}
					all = all[n:]
				}
			}

			// In order on queue 0, far enough that the narrow ring drops
			// blocks, with a few counters held back inside the narrow
			// window (shallower than WidenDepth) and delivered late.
			var c uint64
			held := map[uint64]bool{12345: true, 20000: true, 20001: true, 21000: true}
			for c < 24000 {
				var cs []uint64
				for len(cs) < 64 {
					if !held[c] {
						cs = append(cs, c)
					}
					c++
				}
				for i, ok := range check(0, cs) {
					if !ok {
						t.Fatalf("in-order counter %d rejected", cs[i])
					}
				}
			}
			if acc := check(0, []uint64{20000, 20001, 21000}); !acc[0] || !acc[1] || !acc[2] {
				t.Fatalf("late counters inside the narrow window rejected: %v", acc)
			}
			if w.Wide() {
				t.Fatalf("window widened before any cause")
			}
			replayAll("narrow")
			if w.Wide() {
				t.Fatalf("replays (all rejected) widened the window")
			}

			// The cause. Counter 15000 was accepted in order, in a block the
			// narrow ring has dropped since.
			switch cause {
			case "queue":
				if acc := check(1, []uint64{c}); !acc[0] {
					t.Fatalf("counter %d from queue 1 rejected", c)
				}
				c++
			case "reorder":
				// Hold c back, send WidenDepth+100 more, then deliver c.
				late := c
				c++
				for end := c + WidenDepth + 100; c < end; c += 64 {
					cs := make([]uint64, 0, 64)
					for k := c; k < c+64; k++ {
						cs = append(cs, k)
					}
					check(0, cs)
				}
				if w.Wide() {
					t.Fatalf("widened before the deep counter arrived")
				}
				if acc := check(0, []uint64{late}); !acc[0] {
					t.Fatalf("late counter %d (%d behind) rejected", late, c-1-late)
				}
			}
			if !w.Wide() {
				t.Fatalf("window not wide after the %s cause", cause)
			}
			floor := w.w.floor
			if floor == 0 || floor > c-NarrowWindowSize {
				t.Fatalf("floor = %d, want above 0 and at most the narrow edge %d", floor, c-NarrowWindowSize)
			}
			// Below the floor: rejected, 12345 (never delivered) too, though
			// the wide window's span covers it.
			if acc := check(1, []uint64{floor - 1, 15000, 12345}); acc[0] || acc[1] || acc[2] {
				t.Errorf("counters below the floor %d accepted: %v", floor, acc)
			}
			replayAll("just widened")

			// Wide now: reordering of 100,000 counters is accepted...
			late := c
			c++
			for end := c + 100000; c < end; c += 64 {
				cs := make([]uint64, 0, 64)
				for k := c; k < c+64; k++ {
					cs = append(cs, k)
				}
				for i, ok := range check(int(c/64)%2, cs) {
					if !ok {
						t.Fatalf("counter %d rejected after widening", cs[i])
					}
				}
			}
			if acc := check(0, []uint64{late}); !acc[0] {
				t.Errorf("counter %d, %d behind, rejected by the wide window", late, c-late)
			}
			// ...and nothing seen, before or after the widening, again.
			replayAll("wide")
		})
	}
}
