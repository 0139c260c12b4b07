package replay

import (
	"math"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// FuzzInOrderRuns drives CheckBatchFrom with runs of consecutive counters,
// the shape CheckBatch's in-order path (checkInOrder) takes, which
// FuzzWindow's two bytes per counter rarely build longer than a block.
// Each run is checked against the reference model (refWindow) and against
// a window given the same counters one per CheckBatchFrom call (the
// counter-by-counter path): the verdicts, the count and the whole window
// after, ring included, must be the same.
//
// An input is a policy and limit byte, then four bytes per run: op, a, b,
// n. The run is 1+n counters from a start op&3 chooses, relative to hi,
// the highest counter so far: hi+1+a; hi + (a|b<<8) << (op>>2&63); limit
// - 1 - a - b<<8 (runs that reach or cross the limit); hi - (a|b<<8)
// (behind, not taken by the in-order path). op bit 4 duplicates one
// counter of the run (at a%len), op bits 5-6 are the queue, and op 0xff
// resets the windows. Inputs past 64 runs are cut off.
func FuzzInOrderRuns(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 62, 0, 0, 0, 200})
	f.Add([]byte{0, 1, 0, 1, 255, 0, 0, 0, 64, 0x10, 3, 0, 100})
	f.Add([]byte{1, 2, 5, 0, 30, 0, 0, 0, 10})
	f.Add([]byte{3, 0, 0, 0, 100, 3, 0x10, 0x10, 0, 0, 0, 0, 100, 0x20, 0, 0, 100})
	f.Add([]byte{2, 0xfd, 0xff, 0xff, 3, 0x22, 0, 0, 255, 0xff, 0, 0, 0, 1})
	f.Add([]byte{4, 0, 0, 0, 255, 0x40, 0x10, 0, 255, 3, 0x20, 0x10, 40, 0x60, 0, 0, 255})

	limits := [...]uint64{protocol.RejectAfterMessages, math.MaxUint64, 1 << 20, WindowSize + 70}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		pol := Policy(data[0] % numPolicies)
		limit := limits[(data[0]/numPolicies)%uint8(len(limits))]
		data = data[1:]
		var batched, single Window
		var ref refWindow
		batched.SetPolicy(pol)
		single.SetPolicy(pol)
		ref.reset(pol)
		var hi uint64
		counters := make([]uint64, 0, 257)
		// At most 64 runs: the reference's cost grows with the counters
		// it holds.
		for runs := 0; len(data) >= 4 && runs < 64; data, runs = data[4:], runs+1 {
			op, a, b, n := data[0], uint64(data[1]), uint64(data[2]), int(data[3])+1
			if op == 0xff {
				batched.Reset()
				single.Reset()
				ref.reset(pol)
				hi = 0
				continue
			}
			var start uint64
			switch op & 3 {
			case 0:
				start = hi + 1 + a
			case 1:
				start = hi + (a|b<<8)<<(op>>2&63)
			case 2:
				start = limit - 1 - a - b<<8
			case 3:
				start = hi - (a | b<<8)
			}
			counters = counters[:0]
			for i := range n {
				counters = append(counters, start+uint64(i))
			}
			if op&0x10 != 0 && n > 1 {
				i := 1 + int(a)%(n-1)
				counters[i] = counters[i-1]
			}
			q := int(op>>5) & 3

			ref.from(q, counters, limit)
			want := make([]bool, n)
			wantN := 0
			for i, c := range counters {
				if want[i] = ref.check(c, limit); want[i] {
					wantN++
				}
			}
			got := make([]bool, n)
			gotN, _ := batched.CheckBatchFrom(q, counters, limit, got)
			one := make([]bool, n)
			for i := range counters {
				single.CheckBatchFrom(q, counters[i:i+1], limit, one[i:i+1])
			}
			for i, c := range counters {
				if got[i] != want[i] || one[i] != want[i] {
					t.Fatalf("%v limit %d run %v: counter %d (at %d) batch %v, one by one %v, want %v",
						pol, limit, counters, c, i, got[i], one[i], want[i])
				}
			}
			if gotN != wantN {
				t.Fatalf("%v run from %d: CheckBatchFrom = %d, want %d", pol, start, gotN, wantN)
			}
			if batched.last != ref.last || batched.floor != ref.floor || batched.Wide() != ref.wide {
				t.Fatalf("%v run from %d: newest, floor, wide = %d, %d, %v, want %d, %d, %v",
					pol, start, batched.last, batched.floor, batched.Wide(), ref.last, ref.floor, ref.wide)
			}
			if batched.last != single.last || batched.floor != single.floor || batched.forgot != single.forgot ||
				batched.queue != single.queue || batched.narrow != single.narrow ||
				(batched.wide == nil) != (single.wide == nil) || batched.wide != nil && *batched.wide != *single.wide {
				t.Fatalf("%v run from %d: the window after the batch differs from the window after its counters one by one", pol, start)
			}
			for _, c := range counters {
				if c > hi && c < limit {
					hi = c
				}
			}
		}
	})
}
