package replay

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// TestSharedConcurrent checks one SharedWindow from several goroutines (run
// it with -race). Every counter lies within WindowSize of every other, so no
// interleaving can make one too old: each distinct counter must be accepted
// exactly once in all.
func TestSharedConcurrent(t *testing.T) {
	const goroutines = 8
	const perG = WindowSize / goroutines // 16,376: all counters within the window

	t.Run("disjoint", func(t *testing.T) {
		var s SharedWindow
		s.SetPolicy(Wide)
		var wg sync.WaitGroup
		rejected := make([]int, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				cs := make([]uint64, 0, 64)
				acc := make([]bool, 64)
				for i := range perG {
					c := uint64(i*goroutines + g) // interleaved, disjoint
					if g%2 == 0 {
						if !s.Check(c, protocol.RejectAfterMessages) {
							rejected[g]++
						}
						continue
					}
					cs = append(cs, c)
					if len(cs) == cap(cs) || i == perG-1 {
						rejected[g] += len(cs) - s.CheckBatch(cs, protocol.RejectAfterMessages, acc)
						cs = cs[:0]
					}
				}
			})
		}
		wg.Wait()
		for g, r := range rejected {
			if r != 0 {
				t.Errorf("goroutine %d: %d counters rejected, want 0", g, r)
			}
		}
	})

	t.Run("overlapping", func(t *testing.T) {
		var s SharedWindow
		s.SetPolicy(Wide)
		var wg sync.WaitGroup
		accepted := make([]int, goroutines)
		const distinct = perG * goroutines
		for g := range goroutines {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				// Every goroutine checks every counter once, in its own
				// shuffled order of 64-counter ranges, so each counter is
				// offered goroutines times.
				order := rng.Perm(distinct / 64)
				cs := make([]uint64, 64)
				acc := make([]bool, 64)
				for _, r := range order {
					for i := range cs {
						cs[i] = uint64(r*64 + i)
					}
					if g%2 == 0 {
						for _, c := range cs {
							if s.Check(c, protocol.RejectAfterMessages) {
								accepted[g]++
							}
						}
					} else {
						accepted[g] += s.CheckBatch(cs, protocol.RejectAfterMessages, acc)
					}
				}
			})
		}
		wg.Wait()
		total := 0
		for _, a := range accepted {
			total += a
		}
		if total != distinct/64*64 {
			t.Errorf("accepted %d counters in all, want %d (each distinct counter once)", total, distinct/64*64)
		}
	})
}

// TestSharedConcurrentWidening has goroutines, each a queue, check
// interleaved ranges of one Auto SharedWindow at once (run it with -race):
// the window widens under the lock while the others check, and every
// counter is accepted exactly once. Each goroutine's first batch is checked
// before any goroutine goes on (a barrier), so the window widens while all
// counters are still within the narrow window: nothing may be lost.
func TestSharedConcurrentWidening(t *testing.T) {
	const goroutines = 4
	const ranges = 400 // per goroutine, of 64 counters: 102,400 in all
	var s SharedWindow
	var first, wg sync.WaitGroup
	first.Add(goroutines)
	accepted := make([]int, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			cs := make([]uint64, 64)
			acc := make([]bool, 64)
			for r := range ranges {
				base := uint64(r*goroutines+g) * 64
				for i := range cs {
					cs[i] = base + uint64(i)
				}
				n, _ := s.CheckBatchFrom(g, cs, protocol.RejectAfterMessages, acc)
				// Replays of the batch, from the next queue: none accepted.
				m, _ := s.CheckBatchFrom((g+1)%goroutines, cs, protocol.RejectAfterMessages, acc)
				accepted[g] += n + m
				if r == 0 {
					first.Done()
					first.Wait()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, a := range accepted {
		total += a
	}
	if total != goroutines*ranges*64 {
		t.Errorf("accepted %d counters in all, want %d (each exactly once)", total, goroutines*ranges*64)
	}
	if !s.Wide() {
		t.Errorf("window checked from %d queues is not wide", goroutines)
	}
}

// TestInOrderBatch holds CheckBatch's path for a batch of consecutive
// counters above the highest (checkInOrder) to the counter-by-counter
// check: the same verdicts and the same window after, for batches within
// a block, across one or two block boundaries, after a jump of many
// blocks, after reordering, for every policy, and with the batch's end
// at the limit.
func TestInOrderBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, pol := range []Policy{Auto, Narrow, Wide} {
		for round := range 2000 {
			var batched, single Window
			batched.SetPolicy(pol)
			single.SetPolicy(pol)
			limit := uint64(1) << 40
			if round%10 == 0 {
				limit = 1<<20 + uint64(rng.IntN(200))
			}
			c := uint64(rng.IntN(3)) // 0: the first batch starts at the window's 0
			for range 20 {
				n := 1 + rng.IntN(100)
				switch rng.IntN(4) {
				case 0: // a jump
					c += uint64(rng.IntN(1 << 14))
				case 1: // behind: a batch the fast path does not take
					c -= min(c, uint64(rng.IntN(300)))
				}
				if round%10 == 0 {
					c = max(c, limit-uint64(rng.IntN(150)))
				}
				counters := make([]uint64, n)
				for i := range counters {
					counters[i] = c + uint64(i)
				}
				if rng.IntN(8) == 0 { // not consecutive
					counters[rng.IntN(n)] += uint64(1 + rng.IntN(3))
				}
				got := make([]bool, n)
				gotN := batched.CheckBatch(counters, limit, got)
				wantN := 0
				for i, x := range counters {
					ok := single.Check(x, limit)
					if ok {
						wantN++
					}
					if got[i] != ok {
						t.Fatalf("policy %d round %d: counter %d accepted %v in the batch, %v alone", pol, round, x, got[i], ok)
					}
				}
				if gotN != wantN {
					t.Fatalf("policy %d round %d: batch accepted %d, alone %d", pol, round, gotN, wantN)
				}
				if batched.last != single.last || batched.floor != single.floor || batched.forgot != single.forgot ||
					batched.narrow != single.narrow || (batched.wide == nil) != (single.wide == nil) ||
					batched.wide != nil && *batched.wide != *single.wide {
					t.Fatalf("policy %d round %d: the window differs after the batch from %d", pol, round, counters[0])
				}
				c += uint64(n)
			}
		}
	}
}

// TestCheckBatchShortAcceptedCapacity: CheckBatch with fewer results than
// counters panics, as its doc says, before it records any, also when
// accepted's capacity would hold them all (it resliced accepted to
// len(counters) and wrote the results past len(accepted), where the caller
// never looked).
func TestCheckBatchShortAcceptedCapacity(t *testing.T) {
	var w Window
	var s SharedWindow
	for _, c := range []struct {
		name  string
		batch func(counters []uint64, accepted []bool)
		check func(c uint64) bool
	}{
		{"Window.CheckBatch", func(cs []uint64, a []bool) { w.CheckBatch(cs, protocol.RejectAfterMessages, a) },
			func(c uint64) bool { return w.Check(c, protocol.RejectAfterMessages) }},
		{"Window.CheckBatchFrom", func(cs []uint64, a []bool) { w.CheckBatchFrom(0, cs, protocol.RejectAfterMessages, a) },
			func(c uint64) bool { return w.Check(c, protocol.RejectAfterMessages) }},
		{"SharedWindow.CheckBatch", func(cs []uint64, a []bool) { s.CheckBatch(cs, protocol.RejectAfterMessages, a) },
			func(c uint64) bool { return s.Check(c, protocol.RejectAfterMessages) }},
		{"SharedWindow.CheckBatchFrom", func(cs []uint64, a []bool) { s.CheckBatchFrom(0, cs, protocol.RejectAfterMessages, a) },
			func(c uint64) bool { return s.Check(c, protocol.RejectAfterMessages) }},
	} {
		first := uint64(100)
		if strings.HasSuffix(c.name, "From") {
			first = 200 // a window the first case used
		}
		func() {
			defer func() {
				if r := recover(); r != "replay: accepted shorter than counters" {
					t.Errorf("%s(3 counters, len(accepted) 1, cap 4) panicked with %v, want \"replay: accepted shorter than counters\"", c.name, r)
				}
			}()
			c.batch([]uint64{first, first + 1, first + 2}, make([]bool, 1, 4))
		}()
		// Nothing was recorded, and a SharedWindow is not left locked.
		if !c.check(first) {
			t.Errorf("%s: Check(%d) after the refused batch = false, want true (the batch recorded it)", c.name, first)
		}
	}
}

// TestCheckFromMatchesBatch: CheckFrom gives the verdict, widened and the
// window state of CheckBatchFrom with a batch of the one counter, step by
// step, over random walks of counters (mostly forward, some behind, some
// repeated, some jumps of a ring's lap or more, some at or past the
// limit) from one, two or three queues, under each policy.
func TestCheckFromMatchesBatch(t *testing.T) {
	const limit = 1 << 40
	for pol := range Policy(3) {
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, uint64(pol)))
			var one, batch Window
			one.SetPolicy(pol)
			batch.SetPolicy(pol)
			queues := 1 + int(seed%3)
			var hi uint64
			var seen []uint64
			for step := range 20000 {
				var c uint64
				switch k := rng.IntN(100); {
				case k < 70:
					c = hi + 1 + uint64(rng.IntN(3))
				case k < 80 && hi > 0:
					c = hi - uint64(rng.IntN(int(min(hi, 2*WidenDepth))+1))
				case k < 88 && len(seen) > 0:
					c = seen[rng.IntN(len(seen))]
				case k < 93:
					c = hi + uint64(rng.IntN(4*WindowSize))
				case k < 95:
					c = limit - 1 + uint64(rng.IntN(3))
				default:
					c = hi + 64*uint64(rng.IntN(200))
				}
				q := rng.IntN(queues)
				ok, widened := one.CheckFrom(q, c, limit)
				var acc [1]bool
				n, bwidened := batch.CheckBatchFrom(q, []uint64{c}, limit, acc[:])
				if ok != acc[0] || (n == 1) != ok || widened != bwidened {
					t.Fatalf("%v seed %d step %d: CheckFrom(%d, %d) = %v, %v; CheckBatchFrom %v, %v", pol, seed, step, q, c, ok, widened, acc[0], bwidened)
				}
				if one.last != batch.last || one.floor != batch.floor || one.forgot != batch.forgot || one.queue != batch.queue || one.Wide() != batch.Wide() {
					t.Fatalf("%v seed %d step %d: after %d from %d: state %d/%d/%d/%d/%v, batch's %d/%d/%d/%d/%v", pol, seed, step, c, q,
						one.last, one.floor, one.forgot, one.queue, one.Wide(), batch.last, batch.floor, batch.forgot, batch.queue, batch.Wide())
				}
				if ok {
					hi = max(hi, c)
					if len(seen) < 4096 {
						seen = append(seen, c)
					}
				}
			}
		}
	}
}

// TestNeeded: a window is Needed once it accepted a counter more than
// NarrowWindowSize below the highest (one the narrow window would have
// lost), not for widening alone (a second queue, reordering within the
// narrow window), not for a rejected counter; Reset clears it.
func TestNeeded(t *testing.T) {
	const limit = 1 << 60
	check := func(w *Window, queue int, cs ...uint64) {
		t.Helper()
		w.CheckBatchFrom(queue, cs, limit, make([]bool, len(cs)))
	}
	var w Window
	check(&w, 0, 20000)
	check(&w, 1, 20000-NarrowWindowSize+10) // a second queue: widened, within the narrow window
	if !w.Wide() || w.Needed() {
		t.Fatalf("after a second queue within the narrow window: wide %v needed %v, want true false", w.Wide(), w.Needed())
	}
	check(&w, 1, 20000-NarrowWindowSize+10) // a replay: rejected
	if w.Needed() {
		t.Fatal("needed after a rejected counter")
	}
	check(&w, 1, 20000-NarrowWindowSize-100) // beyond the narrow window, accepted by the wide
	if !w.Needed() {
		t.Fatal("not needed after accepting a counter only the wide window holds")
	}
	w.Reset()
	if w.Needed() {
		t.Fatal("needed after Reset")
	}
	var n Window
	n.SetPolicy(Narrow)
	check(&n, 0, 20000)
	check(&n, 1, 100) // too old for the narrow window: rejected, never needed
	if n.Needed() {
		t.Fatal("a narrow window is needed")
	}
}
