package replay

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	wgreplay "golang.zx2c4.com/wireguard/replay"

	"github.com/wgpio/wgpio/protocol"
)

// step is one check of a known-answer sequence.
type step struct {
	counter uint64
	want    bool
}

// wgWindowSize is the width of wireguard-go's and the Linux kernel's window:
// 127 blocks of 64 bits (wireguard-go replay/replay.go, kernel
// drivers/net/wireguard/receive.c). The known-answer sequences below are
// written in terms of a window width so that the same function yields the
// sequence for stock wireguard-go (checked against its Filter) and for ours.
const wgWindowSize = (128 - 1) * 64

// selftest returns the WireGuard replay selftest (Linux kernel
// drivers/net/wireguard/selftest/counter.c, also wireguard-go
// replay/replay_test.go TestReplay), restated for a window of size counters:
// tLim is the first distance at which a counter falls out of the window.
func selftest(size uint64) []step {
	tLim := size + 1
	const r = protocol.RejectAfterMessages
	return []step{
		{0, true},                    // 1: first counter
		{1, true},                    // 2: next
		{1, false},                   // 3: duplicate
		{9, true},                    // 4: skip ahead
		{8, true},                    // 5: late, in window
		{7, true},                    // 6: late, in window
		{7, false},                   // 7: duplicate of a late one
		{tLim, true},                 // 8: jump by the window
		{tLim - 1, true},             // 9: late
		{tLim - 1, false},            // 10: duplicate
		{tLim - 2, true},             // 11: late
		{2, true},                    // 12: exactly size behind: still in
		{2, false},                   // 13: duplicate
		{tLim + 16, true},            // 14: forward
		{3, false},                   // 15: now out of the window
		{tLim + 16, false},           // 16: duplicate of the newest
		{tLim * 4, true},             // 17: big jump
		{tLim*4 - (tLim - 1), true},  // 18: exactly size behind
		{10, false},                  // 19: far behind
		{tLim*4 - tLim, false},       // 20: size+1 behind
		{tLim*4 - (tLim + 1), false}, // 21: size+2 behind
		{tLim*4 - (tLim - 2), true},  // 22: size-1 behind
		{tLim*4 + 1 - tLim, false},   // 23: duplicate of 18
		{0, false},                   // 24: far behind
		{r, false},                   // 25: at the limit
		{r - 1, true},                // 26: just under the limit
		{r, false},                   // 27: at the limit
		{r - 1, false},               // 28: duplicate
		{r - 2, true},                // 29: late
		{r + 1, false},               // 30: over the limit
		{r + 2, false},               // 31: over the limit
		{r - 2, false},               // 32: duplicate
		{r - 3, true},                // 33: late
		{0, false},                   // 34: far behind
	}
}

// bulk returns the selftest's six bulk runs for a window of size counters:
// ascending and descending runs that end exactly at the window's edge.
func bulk(size uint64) [][]step {
	var runs [][]step
	var s []step
	// 1: 1..size ascending, then 0 is exactly size behind.
	for i := uint64(1); i <= size; i++ {
		s = append(s, step{i, true})
	}
	runs = append(runs, append(s, step{0, true}, step{0, false}))
	// 2: 2..size+1 ascending; 1 is size behind, 0 is size+1 behind.
	s = nil
	for i := uint64(2); i <= size+1; i++ {
		s = append(s, step{i, true})
	}
	runs = append(runs, append(s, step{1, true}, step{0, false}))
	// 3: size+1 down to 1.
	s = nil
	for i := size + 1; i > 0; i-- {
		s = append(s, step{i, true})
	}
	runs = append(runs, s)
	// 4: size+2 down to 2; then 0 is size+2 behind.
	s = nil
	for i := size + 2; i > 1; i-- {
		s = append(s, step{i, true})
	}
	runs = append(runs, append(s, step{0, false}))
	// 5: size down to 1, then size+1 pushes 0 out.
	s = nil
	for i := size; i > 0; i-- {
		s = append(s, step{i, true})
	}
	runs = append(runs, append(s, step{size + 1, true}, step{0, false}))
	// 6: size down to 1, then 0 while still in, then size+1.
	s = nil
	for i := size; i > 0; i-- {
		s = append(s, step{i, true})
	}
	runs = append(runs, append(s, step{0, true}, step{size + 1, true}))
	return runs
}

// edges are cases of our own width, derived from the rule "rejected when
// highest - counter > WindowSize" and from the ring's geometry (2048 blocks
// of 64 counters), not from the implementation.
func edges() []step {
	const w = WindowSize
	const ring = 2048 * 64 // counters the ring can hold, one lap
	return []step{
		{63, true},                 // last counter of block 0
		{ring + 63, true},          // same ring slot as block 0, one lap on: block 0 cleared
		{63, false},                // a full lap behind
		{ring + 63 - w, true},      // exactly WindowSize behind
		{ring + 63 - w - 1, false}, // one more: too old
		{ring + 64, true},          // next block
		{ring + 62, true},          // late, same block as the newest
		{ring + 62, false},         // duplicate
		{2*ring + 64, true},        // jump by exactly one lap: the ring is cleared
		{ring + 64, false},         // a lap behind
		{2*ring + 64 - w, true},    // exactly WindowSize behind
		{2*ring + 63, true},        // in the block just before the newest
		{math.MaxUint64 - 1, true}, // jump to the top (limit MaxUint64 below)
		{math.MaxUint64, false},    // at the limit
		{math.MaxUint64 - 1 - w, true},
		{math.MaxUint64 - 2 - w, false},
	}
}

// checkFunc checks a sequence of counters from a clean window and stores
// the verdicts in got.
type checkFunc func(counters []uint64, limit uint64, got []bool)

// implementations returns every way of driving the window, each over a
// window reused across sequences (so Reset is exercised on a dirty window).
//
// The windows are Wide: the sequences are written for one width, and the
// narrow forms are checked apart (narrowImplementations).
func implementations() map[string]checkFunc {
	var single, batch1, batchAll, batch7 Window
	var shared, sharedBatch SharedWindow
	for _, w := range []*Window{&single, &batch1, &batchAll, &batch7, &shared.w, &sharedBatch.w} {
		w.SetPolicy(Wide)
	}
	return map[string]checkFunc{
		"Window.Check": func(cs []uint64, limit uint64, got []bool) {
			single.Reset()
			for i, c := range cs {
				got[i] = single.Check(c, limit)
			}
		},
		"Window.CheckBatch/1": func(cs []uint64, limit uint64, got []bool) {
			batch1.Reset()
			for i := range cs {
				batch1.CheckBatch(cs[i:i+1], limit, got[i:i+1])
			}
		},
		"Window.CheckBatch/7": func(cs []uint64, limit uint64, got []bool) {
			batch7.Reset()
			for i := 0; i < len(cs); i += 7 {
				j := min(i+7, len(cs))
				batch7.CheckBatch(cs[i:j], limit, got[i:j])
			}
		},
		"Window.CheckBatch/all": func(cs []uint64, limit uint64, got []bool) {
			batchAll.Reset()
			batchAll.CheckBatch(cs, limit, got)
		},
		"SharedWindow.Check": func(cs []uint64, limit uint64, got []bool) {
			shared.Reset()
			for i, c := range cs {
				got[i] = shared.Check(c, limit)
			}
		},
		"SharedWindow.CheckBatch/64": func(cs []uint64, limit uint64, got []bool) {
			sharedBatch.Reset()
			for i := 0; i < len(cs); i += 64 {
				j := min(i+64, len(cs))
				sharedBatch.CheckBatch(cs[i:j], limit, got[i:j])
			}
		},
	}
}

func runSteps(t *testing.T, name string, check checkFunc, steps []step, limit uint64) {
	t.Helper()
	cs := make([]uint64, len(steps))
	for i, s := range steps {
		cs[i] = s.counter
	}
	got := make([]bool, len(steps))
	check(cs, limit, got)
	for i, s := range steps {
		if got[i] != s.want {
			t.Fatalf("%s: step %d: check(%d) = %v, want %v", name, i+1, s.counter, got[i], s.want)
		}
	}
}

func TestKnownAnswers(t *testing.T) {
	type seq struct {
		name  string
		steps func(size uint64) []step
		limit uint64
	}
	seqs := []seq{{"selftest", selftest, protocol.RejectAfterMessages}}
	for i := range 6 {
		seqs = append(seqs, seq{
			name:  fmt.Sprintf("bulk%d", i+1),
			steps: func(size uint64) []step { return bulk(size)[i] },
			limit: protocol.RejectAfterMessages,
		})
	}

	// The sequences at wireguard-go's width must hold for stock
	// wireguard-go: this checks that they were restated faithfully.
	t.Run("wireguard-go", func(t *testing.T) {
		var f wgreplay.Filter
		check := func(cs []uint64, limit uint64, got []bool) {
			f.Reset()
			for i, c := range cs {
				got[i] = f.ValidateCounter(c, limit)
			}
		}
		for _, s := range seqs {
			runSteps(t, s.name, check, s.steps(wgWindowSize), s.limit)
		}
	})

	// The bulk runs (131,008 checks each) go through three of the forms
	// only, to keep the package's tests fast under -race; the fuzz target
	// covers every batch split.
	bulkForms := map[string]bool{
		"Window.Check":               true,
		"Window.CheckBatch/7":        true,
		"SharedWindow.CheckBatch/64": true,
	}
	for name, check := range implementations() {
		t.Run(name, func(t *testing.T) {
			for _, s := range seqs {
				if s.name != "selftest" && !bulkForms[name] {
					continue
				}
				runSteps(t, s.name, check, s.steps(WindowSize), s.limit)
			}
			runSteps(t, "edges", check, edges(), math.MaxUint64)
		})
	}
}

func TestWindowSize(t *testing.T) {
	if WindowSize != 131008 {
		t.Errorf("WindowSize = %d, want 131008", WindowSize)
	}
	if NarrowWindowSize != wgWindowSize {
		t.Errorf("NarrowWindowSize = %d, want %d (the kernel's)", NarrowWindowSize, wgWindowSize)
	}
	if protocol.RejectAfterMessages != 1<<64-1<<13-1 {
		t.Errorf("protocol.RejectAfterMessages = %d, want 2^64-2^13-1", protocol.RejectAfterMessages)
	}
	var w Window
	if got := len(w.narrow) * 8; got != 1<<10 {
		t.Errorf("narrow ring = %d bytes, want 1 KiB", got)
	}
	if got := unsafe.Sizeof(w); got > 1100 {
		t.Errorf("unsafe.Sizeof(Window{}) = %d bytes, want at most 1100 (the narrow ring and a few words)", got)
	}
	w.SetPolicy(Wide)
	if got := len(w.wide) * 8; got != 16<<10 {
		t.Errorf("wide ring = %d bytes, want 16 KiB", got)
	}
}

func TestLimit(t *testing.T) {
	tests := []struct {
		counter, limit uint64
		want           bool
	}{
		{0, 0, false},
		{0, 1, true},
		{1, 1, false},
		{protocol.RejectAfterMessages - 1, protocol.RejectAfterMessages, true},
		{protocol.RejectAfterMessages, protocol.RejectAfterMessages, false},
		{math.MaxUint64, protocol.RejectAfterMessages, false},
		{math.MaxUint64, math.MaxUint64, false},
		{math.MaxUint64 - 1, math.MaxUint64, true},
	}
	for _, tt := range tests {
		var w Window
		if got := w.Check(tt.counter, tt.limit); got != tt.want {
			t.Errorf("Check(%d, %d) = %v, want %v", tt.counter, tt.limit, got, tt.want)
		}
		// A counter over the limit must not move the window.
		if !tt.want && tt.counter > 0 && w.last != 0 {
			t.Errorf("Check(%d, %d) moved the window to %d", tt.counter, tt.limit, w.last)
		}
	}
}

func TestBatchDuplicates(t *testing.T) {
	tests := []struct {
		name     string
		counters []uint64
		want     []bool
	}{
		{"repeat", []uint64{5, 5}, []bool{true, false}},
		{"repeat after newer", []uint64{5, 6, 5, 6}, []bool{true, true, false, false}},
		{"triple", []uint64{7, 7, 7}, []bool{true, false, false}},
		{"jump then old", []uint64{0, WindowSize + 1, 0}, []bool{true, true, false}},
		{"jump then edge", []uint64{1, WindowSize + 1, 1}, []bool{true, true, false}},
		{"old then jump", []uint64{1, WindowSize + 2, 1}, []bool{true, true, false}},
		{"edge kept", []uint64{WindowSize + 1, 1, 1}, []bool{true, true, false}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			w.SetPolicy(Wide)
			got := make([]bool, len(tt.counters))
			n := w.CheckBatch(tt.counters, protocol.RejectAfterMessages, got)
			wantN := 0
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("CheckBatch(%v)[%d] = %v, want %v", tt.counters, i, got[i], tt.want[i])
				}
				if tt.want[i] {
					wantN++
				}
			}
			if n != wantN {
				t.Errorf("CheckBatch(%v) = %d, want %d", tt.counters, n, wantN)
			}
		})
	}
}

func TestCheckBatchShortAccepted(t *testing.T) {
	for _, name := range []string{"Window", "SharedWindow"} {
		t.Run(name, func(t *testing.T) {
			var w Window
			var s SharedWindow
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s.CheckBatch with len(accepted) < len(counters) did not panic", name)
					}
				}()
				if name == "Window" {
					w.CheckBatch([]uint64{1, 2}, protocol.RejectAfterMessages, make([]bool, 1))
				} else {
					s.CheckBatch([]uint64{1, 2}, protocol.RejectAfterMessages, make([]bool, 1))
				}
			}()
			// The shared window must not be left locked.
			if name == "SharedWindow" && !s.Check(3, protocol.RejectAfterMessages) {
				t.Errorf("SharedWindow.Check(3) = false after a panicking batch, want true")
			}
		})
	}
}

// TestAgreesWithWireGuard drives our windows and stock wireguard-go's with
// the same random sequences. A Narrow window is the kernel's width: its
// verdicts must match wireguard-go's on every sequence, reordering of any
// depth included. A Wide window, on sequences whose counters never fall
// more than 8,000 behind the newest (so that the width never matters), must
// match too.
func TestAgreesWithWireGuard(t *testing.T) {
	for _, tt := range []struct {
		policy Policy
		depth  uint64 // how far behind the newest a counter may be
	}{
		{Narrow, 3 * NarrowWindowSize},
		{Wide, 8000},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var w Window
			w.SetPolicy(tt.policy)
			var f wgreplay.Filter
			var hi uint64
			for i := range 200000 {
				var c uint64
				switch r := rng.IntN(1000); {
				case r == 0: // jump far ahead: both clear their rings
					c = hi + rng.Uint64N(1<<40)
				case r < 5: // at or over the limit
					c = protocol.RejectAfterMessages + rng.Uint64N(3) - 1
					if c < protocol.RejectAfterMessages {
						continue // would move both to the top; keep going below it
					}
				case r < 100: // duplicate-prone: near the newest
					c = hi - min(hi, rng.Uint64N(64))
				default: // mostly forward, some reordering up to depth behind
					c = hi + rng.Uint64N(200)
					c -= min(c, rng.Uint64N(tt.depth))
					c = max(c, hi-min(hi, tt.depth))
				}
				if c > hi && c < protocol.RejectAfterMessages {
					hi = c
				}
				got, want := w.Check(c, protocol.RejectAfterMessages), f.ValidateCounter(c, protocol.RejectAfterMessages)
				if got != want {
					t.Fatalf("step %d: Check(%d) = %v, want %v (wireguard-go)", i, c, got, want)
				}
			}
		})
	}
}

// TestNarrowKnownAnswers runs the kernel's selftest and bulk runs at the
// kernel's width through a Narrow window, in batches of 5.
func TestNarrowKnownAnswers(t *testing.T) {
	seqs := [][]step{selftest(NarrowWindowSize)}
	seqs = append(seqs, bulk(NarrowWindowSize)...)
	var w Window
	w.SetPolicy(Narrow)
	check := func(cs []uint64, limit uint64, got []bool) {
		w.Reset()
		for i := 0; i < len(cs); i += 5 {
			j := min(i+5, len(cs))
			w.CheckBatch(cs[i:j], limit, got[i:j])
		}
	}
	for i, s := range seqs {
		runSteps(t, fmt.Sprintf("seq%d", i), check, s, protocol.RejectAfterMessages)
	}
	if w.Wide() {
		t.Errorf("Narrow window widened")
	}
}

func TestNoAllocs(t *testing.T) {
	var w, narrow, wide, widened Window
	var s SharedWindow
	narrow.SetPolicy(Narrow)
	wide.SetPolicy(Wide)
	// An Auto window widened by a second queue, before the runs: the
	// steady path after widening allocates nothing either.
	widened.CheckBatchFrom(0, []uint64{1}, protocol.RejectAfterMessages, make([]bool, 1))
	widened.CheckBatchFrom(1, []uint64{2}, protocol.RejectAfterMessages, make([]bool, 1))
	if !widened.Wide() {
		t.Fatalf("Auto window checked from two queues is not wide")
	}
	counters := make([]uint64, 64)
	accepted := make([]bool, 64)
	var base uint64
	batch := func(check func([]uint64, uint64, []bool) int) func() {
		return func() {
			for i := range counters {
				counters[i] = base + uint64(i)
			}
			base += 64
			check(counters, protocol.RejectAfterMessages, accepted)
		}
	}
	queue := 0
	fromAlternate := func(cs []uint64, l uint64, a []bool) int {
		queue ^= 1
		n, _ := widened.CheckBatchFrom(queue, cs, l, a)
		return n
	}
	fromZero := func(cs []uint64, l uint64, a []bool) int { n, _ := s.CheckBatchFrom(0, cs, l, a); return n }
	tests := []struct {
		name string
		fn   func()
	}{
		{"Window.Check", func() { base++; w.Check(base, protocol.RejectAfterMessages) }},
		{"SharedWindow.Check", func() { base++; s.Check(base, protocol.RejectAfterMessages) }},
		{"Window.CheckBatch", batch(w.CheckBatch)},
		{"Window.CheckBatch/Narrow", batch(narrow.CheckBatch)},
		{"Window.CheckBatch/Wide", batch(wide.CheckBatch)},
		{"Window.CheckBatchFrom/widened", batch(fromAlternate)},
		{"SharedWindow.CheckBatch", batch(s.CheckBatch)},
		{"SharedWindow.CheckBatchFrom", batch(fromZero)},
		{"Window.CheckFrom", func() { base++; w.CheckFrom(0, base, protocol.RejectAfterMessages) }},
		{"Window.CheckFrom/replay", func() { w.CheckFrom(0, base, protocol.RejectAfterMessages) }},
		{"SharedWindow.CheckFrom", func() { base++; s.CheckFrom(0, base, protocol.RejectAfterMessages) }},
		{"Window.Reset", func() { w.Reset() }},
		{"Window.Reset/Wide", func() { wide.Reset() }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(1000, tt.fn); got != 0 {
			t.Errorf("AllocsPerRun(%s) = %v, want 0", tt.name, got)
		}
	}
}

// reorderTrace simulates a sender that reserves its counters in ranges of
// 64 for 16 producers (transmit queues) and a receiver whose queues deliver
// them with a per-producer delay of up to skew counters. Each producer's
// ranges arrive in its order (a queue is FIFO), but producers overtake one
// another. Every delivered batch may carry injected duplicates: a counter
// from earlier in the same batch, or from an earlier batch.
//
// It returns the batches in arrival order and, for each counter, whether it
// is an original (true) or an injected duplicate (false).
func reorderTrace(rng *rand.Rand, producers, rangesPerProducer int, skew uint64) (batches [][]uint64, original [][]bool) {
	const span = 64
	type arrival struct {
		at    uint64 // arrival time, in counters of the sender's clock
		start uint64 // first counter of the range
	}
	var arrivals []arrival
	for p := range producers {
		delay := rng.Uint64N(skew + 1)
		for k := range rangesPerProducer {
			start := uint64(k*producers+p) * span
			arrivals = append(arrivals, arrival{start + delay, start})
			// A random walk of the delay, by less than the distance between
			// this producer's ranges (span*producers), keeps each producer
			// in order.
			step := rng.Uint64N(span * uint64(producers))
			if rng.IntN(2) == 0 {
				delay = min(skew, delay+step)
			} else {
				delay -= min(delay, step)
			}
			if rng.IntN(200) == 0 { // a stall: this queue falls far behind
				delay = skew
			}
		}
	}
	slices.SortStableFunc(arrivals, func(x, y arrival) int { return cmp.Compare(x.at, y.at) })

	var delivered []uint64
	for _, a := range arrivals {
		var b []uint64
		var o []bool
		for c := a.start; c < a.start+span; c++ {
			b = append(b, c)
			o = append(o, true)
			switch r := rng.IntN(64); {
			case r == 0: // duplicate from earlier in this batch
				b = append(b, b[rng.IntN(len(b))])
				o = append(o, false)
			case r == 1 && len(delivered) > 0: // duplicate from an earlier batch
				b = append(b, delivered[rng.IntN(len(delivered))])
				o = append(o, false)
			}
		}
		for i, c := range b {
			if o[i] {
				delivered = append(delivered, c)
			}
		}
		batches = append(batches, b)
		original = append(original, o)
	}
	return batches, original
}

func TestReorderTolerance(t *testing.T) {
	const (
		producers = 16
		ranges    = 200 // per producer: 204,800 counters in all
		skew      = 100000
	)
	rng := rand.New(rand.NewPCG(6479, 131008))
	batches, original := reorderTrace(rng, producers, ranges, skew)

	// Wide from the start, and Auto told the producer of each batch (as
	// the fast path tells it the queue): the second producer's first batch
	// widens it while every counter is still in the narrow window.
	var w, auto Window
	w.SetPolicy(Wide)
	var f wgreplay.Filter
	var maxBehind uint64
	var hi uint64
	var originals, dups, wgRejected, wgDupAccepted, autoLost int
	for bi, b := range batches {
		accepted := make([]bool, len(b))
		autoAcc := make([]bool, len(b))
		w.CheckBatch(b, protocol.RejectAfterMessages, accepted)
		auto.CheckBatchFrom(int(b[0]/64%producers), b, protocol.RejectAfterMessages, autoAcc)
		for i, c := range b {
			if autoAcc[i] && !accepted[i] {
				t.Fatalf("batch %d: Auto window accepted %d, which the Wide window rejects", bi, c)
			}
			if original[bi][i] && !autoAcc[i] {
				autoLost++
			}
		}
		for i, c := range b {
			if original[bi][i] {
				originals++
				if !accepted[i] {
					t.Errorf("batch %d: CheckBatch(%d) = false, want true (original, %d behind the newest)", bi, c, hi-min(hi, c))
				}
			} else {
				dups++
				if accepted[i] {
					t.Errorf("batch %d: CheckBatch(%d) = true, want false (injected duplicate)", bi, c)
				}
			}
			if c > hi {
				hi = c
			}
			if original[bi][i] {
				maxBehind = max(maxBehind, hi-c)
			}
			ok := f.ValidateCounter(c, protocol.RejectAfterMessages)
			if original[bi][i] && !ok {
				wgRejected++
			}
			if !original[bi][i] && ok {
				wgDupAccepted++
			}
		}
	}
	if dups == 0 {
		t.Fatalf("trace has no injected duplicates")
	}
	if maxBehind <= wgWindowSize {
		t.Fatalf("trace reorders by at most %d, want more than wireguard-go's %d", maxBehind, wgWindowSize)
	}
	t.Logf("%d originals, %d injected duplicates, originals up to %d counters behind the newest", originals, dups, maxBehind)
	if !auto.Wide() {
		t.Errorf("Auto window checked from %d producers is not wide", producers)
	}
	// The trace starts with a producer up to skew counters late: what the
	// other producers sent first has left the narrow window by the time it
	// shows up and widens the window, and stays below the floor.
	t.Logf("Auto window: lost %d of %d originals to the narrow start (%.1f%%)", autoLost, originals, 100*float64(autoLost)/float64(originals))
	t.Logf("wireguard-go replay.Filter (%d counters) rejects %d of %d originals (%.1f%%); it accepts %d duplicates",
		wgWindowSize, wgRejected, originals, 100*float64(wgRejected)/float64(originals), wgDupAccepted)
}
