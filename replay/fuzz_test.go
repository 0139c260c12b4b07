package replay

import (
	"encoding/binary"
	"maps"
	"math"
	"strconv"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// refWindow is the slow, obvious reference: the set of every counter ever
// accepted, the highest one, and the policy's rules written as stated in
// the package documentation, with nothing of the ring but the block (64
// counters) that the floor is defined by.
type refWindow struct {
	policy Policy
	seen   map[uint64]bool
	last   uint64 // highest accepted; 0 when empty, as in WireGuard
	wide   bool
	floor  uint64
	queue  int // the first batch's queue, -1 before
}

func (r *refWindow) reset(p Policy) {
	*r = refWindow{policy: p, seen: map[uint64]bool{}, wide: p == Wide, queue: -1}
}

// widen applies Auto's widening: the floor is the start of the block after
// the highest block holding an accepted counter that the narrow ring has
// dropped (a block b is dropped once the newest counter's block reaches
// b + 128).
func (r *refWindow) widen() {
	r.wide = true
	for c := range r.seen {
		if b := c >> 6; b+narrowBlocks <= r.last>>6 {
			r.floor = max(r.floor, (b+1)<<6)
		}
	}
}

// from is a batch of counters from queue q: a second queue widens an Auto
// window if the widened window accepts one of them.
func (r *refWindow) from(q int, counters []uint64, limit uint64) {
	switch {
	case r.queue < 0:
		r.queue = q
	case q != r.queue && r.policy == Auto && !r.wide:
		wide := *r
		wide.seen = maps.Clone(r.seen)
		wide.widen()
		for _, c := range counters {
			if wide.check(c, limit) {
				r.widen()
				return
			}
		}
	}
}

func (r *refWindow) check(c, limit uint64) bool {
	size := uint64(NarrowWindowSize)
	if r.wide {
		size = WindowSize
	}
	switch {
	case c >= limit:
		return false
	case c < r.floor:
		return false // below the floor set by widening
	case c < r.last && r.last-c > size:
		return false // too old
	case r.seen[c]:
		return false // replay
	}
	r.seen[c] = true
	r.last = max(r.last, c)
	if r.policy == Auto && !r.wide && r.last-c > WidenDepth {
		r.widen()
	}
	return true
}

// fuzzLimits are the limits a fuzz input selects with its first byte.
var fuzzLimits = [...]uint64{
	protocol.RejectAfterMessages,
	math.MaxUint64,
	0,
	1,
	WindowSize,
	WindowSize + 1,
	3 * 2048 * 64,
	1 << 40,
}

// Opcodes of a fuzz program. Each counter is made by one opcode byte:
// bits 0-2 choose how (relative to hi, the highest counter generated so
// far), bit 3 ends the batch after it, bits 4-5 of a batch's first opcode
// are the queue the batch comes from, and the value 0xff resets the window.
const (
	opForward  = iota // hi + next byte
	opBehind          // hi - next 2 bytes (reordering inside the window)
	opEdge            // hi - WindowSize + int8(next byte): the window's edge
	opJump            // hi + (next 2 bytes << (next byte & 63)): huge jumps
	opLimit           // limit - 1 - next byte, or limit + next byte if bit 7
	opRepeat          // a counter generated earlier (next byte back)
	opAbsolute        // next 8 bytes
	opLap             // hi ± one ring lap (2048*64) ± int8(next byte)

	opEndBatch = 1 << 3
	opReset    = 0xff
)

// program is a decoded fuzz input: segments separated by resets, each a
// list of counters with the batch boundaries the input chose.
type program struct {
	limit    uint64
	segments [][]uint64
	ends     [][]bool // ends[s][i]: a batch ends after segments[s][i]
	queues   [][]int  // queues[s][i]: the queue of the batch segments[s][i] is in (its first opcode's bits 4-5)
}

func decode(data []byte) program {
	var p program
	if len(data) == 0 {
		return p
	}
	p.limit = fuzzLimits[data[0]%uint8(len(fuzzLimits))]
	data = data[1:]
	next := func(n int) []byte {
		var b [8]byte
		copy(b[:n], data)
		data = data[min(n, len(data)):]
		return b[:n]
	}
	var hi uint64
	var all []uint64
	p.segments = [][]uint64{nil}
	p.ends = [][]bool{nil}
	p.queues = [][]int{nil}
	queue, batchStart := 0, true
	for len(data) > 0 {
		op := next(1)[0]
		if op == opReset {
			p.segments = append(p.segments, nil)
			p.ends = append(p.ends, nil)
			p.queues = append(p.queues, nil)
			hi = 0
			batchStart = true
			continue
		}
		if batchStart {
			queue = int(op>>4) & 3
		}
		batchStart = op&opEndBatch != 0
		var c uint64
		switch op & 7 {
		case opForward:
			c = hi + uint64(next(1)[0])
		case opBehind:
			c = hi - uint64(binary.LittleEndian.Uint16(next(2)))
		case opEdge:
			c = hi - WindowSize + uint64(int64(int8(next(1)[0])))
		case opJump:
			b := next(3)
			c = hi + uint64(binary.LittleEndian.Uint16(b))<<(b[2]&63)
		case opLimit:
			b := next(1)[0]
			if b&0x80 != 0 {
				c = p.limit + uint64(b&0x7f)
			} else {
				c = p.limit - 1 - uint64(b)
			}
		case opRepeat:
			back := int(next(1)[0])
			if len(all) > 0 {
				c = all[len(all)-1-back%len(all)]
			}
		case opAbsolute:
			c = binary.LittleEndian.Uint64(next(8))
		case opLap:
			b := next(1)[0]
			d := uint64(2048*64) + uint64(int64(int8(b>>1)))
			if b&1 != 0 {
				c = hi + d
			} else {
				c = hi - d
			}
		}
		// hi follows the counters generated (wrapping arithmetic is fine:
		// every uint64 is a valid input).
		if c > hi && c < p.limit {
			hi = c
		}
		all = append(all, c)
		s := len(p.segments) - 1
		p.segments[s] = append(p.segments[s], c)
		p.ends[s] = append(p.ends[s], op&opEndBatch != 0)
		p.queues[s] = append(p.queues[s], queue)
	}
	return p
}

// seed builds a fuzz input: a limit selector followed by opcodes and their
// operands.
func seed(limit byte, ops ...byte) []byte { return append([]byte{limit}, ops...) }

func FuzzWindow(f *testing.F) {
	// In order, one batch.
	f.Add(seed(0, opForward, 1, opForward, 1, opForward, 1, opForward|opEndBatch, 1))
	// Duplicates inside one batch and across batches.
	f.Add(seed(0, opForward, 5, opRepeat, 0, opForward|opEndBatch, 1, opRepeat, 1, opRepeat, 0))
	// Reordering, then the window's edge on both sides.
	f.Add(seed(0, opForward, 200, opJump, 0, 1, 17, opBehind, 0xff, 0xff, opEdge, 0, opEdge, 0xff, opEdge, 1))
	// A jump by exactly one lap of the ring, and back.
	f.Add(seed(0, opForward, 63, opLap|opEndBatch, 1, opLap, 0, opLap, 2, opRepeat, 2))
	// Next to protocol.RejectAfterMessages, and to the largest limit.
	f.Add(seed(0, opLimit, 0, opLimit, 0x80, opLimit, 1, opLimit, 0x81, opRepeat, 1))
	f.Add(seed(1, opLimit, 0, opLimit, 0, opAbsolute, 0, 0, 0, 0, 0, 0, 0, 0))
	// A tiny limit: nothing accepted with limit 0; only 0 with limit 1.
	f.Add(seed(2, opForward, 0, opForward, 1))
	f.Add(seed(3, opForward, 0, opForward, 0, opForward, 1))
	// Resets between segments, the second starting dirty.
	f.Add(seed(0, opJump, 0xff, 0xff, 20, opReset, opForward, 0, opRepeat, 0, opReset, opJump, 1, 0, 6))
	// Auto widening: a second queue (bits 4-5 of a batch's first opcode)
	// after the narrow window dropped a block; then reordering deeper than
	// WidenDepth (0x10 0x10 = 4112 behind) after a run forward.
	f.Add(seed(0, opForward, 1, opJump|opEndBatch, 0, 0x21, 0, opForward|0x10, 3, opBehind, 0x10, 0x10, opRepeat, 1))
	f.Add(seed(0, opJump, 0x10, 0x10, 0, opForward|opEndBatch, 1, opBehind, 0x10, 0x10, opBehind, 0xc0, 0x1f, opRepeat, 2, opEdge, 0))
	// A limit of WindowSize+1 with the edge counters.
	f.Add(seed(5, opAbsolute, 0xc0, 0xff, 1, 0, 0, 0, 0, 0, opForward, 0, opRepeat, 1))

	// Every input runs under each policy.
	var (
		single, batched, chunked [numPolicies]Window
		shared                   [numPolicies]SharedWindow
		ref, refQ                refWindow
	)
	for p := range Policy(numPolicies) {
		single[p].SetPolicy(p)
		batched[p].SetPolicy(p)
		chunked[p].SetPolicy(p)
		shared[p].SetPolicy(p)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := decode(data)
		for p := range Policy(numPolicies) {
			fuzzPolicy(t, prog, p, &single[p], &batched[p], &chunked[p], &shared[p], &ref, &refQ)
		}
	})
}

const numPolicies = 3 // Auto, Narrow, Wide

// fuzzPolicy runs one decoded program on windows of policy p, reused across
// inputs (so Reset is exercised on dirty windows), against the reference:
// ref for the calls that give no queue, refQ for batches from the queues
// the input chose.
func fuzzPolicy(t *testing.T, prog program, pol Policy, single, batched, chunked *Window, shared *SharedWindow, ref, refQ *refWindow) {
	var lastSeg []uint64
	var lastWant []bool
	for si, seg := range prog.segments {
		ref.reset(pol)
		refQ.reset(pol)
		want := make([]bool, len(seg))
		for i, c := range seg {
			want[i] = ref.check(c, prog.limit)
		}
		// The verdicts of batches from the input's queues.
		wantQ := make([]bool, len(seg))
		for i, c := range seg {
			if i == 0 || prog.ends[si][i-1] {
				end := i
				for end < len(seg)-1 && !prog.ends[si][end] {
					end++
				}
				refQ.from(prog.queues[si][i], seg[i:end+1], prog.limit)
			}
			wantQ[i] = refQ.check(c, prog.limit)
		}
		lastSeg, lastWant = seg, want
		compare := func(name string, want, got []bool, w *Window, r *refWindow) {
			t.Helper()
			for i := range seg {
				if got[i] != want[i] {
					t.Fatalf("%v segment %d: %s: check(%d) at %d = %v, want %v (limit %d)", pol, si, name, seg[i], i, got[i], want[i], prog.limit)
				}
			}
			if w.last != r.last || w.Wide() != r.wide || w.floor != r.floor {
				t.Fatalf("%v segment %d: %s: newest, wide, floor = %d, %v, %d, want %d, %v, %d",
					pol, si, name, w.last, w.Wide(), w.floor, r.last, r.wide, r.floor)
			}
		}

		// One at a time, on a window reused (Reset, not fresh).
		single.Reset()
		got := make([]bool, len(seg))
		for i, c := range seg {
			got[i] = single.Check(c, prog.limit)
		}
		compare("Check", want, got, single, ref)

		// One at a time from the queues of the input's batches
		// (CheckFrom, a batch of one each), on the single-owner and the
		// shared window.
		var refOne refWindow
		refOne.reset(pol)
		wantOne := make([]bool, len(seg))
		qOf := make([]int, len(seg))
		for i, c := range seg {
			qOf[i] = prog.queues[si][i]
			if i > 0 && !prog.ends[si][i-1] {
				qOf[i] = qOf[i-1] // the queue of the batch c is in
			}
			refOne.from(qOf[i], seg[i:i+1], prog.limit)
			wantOne[i] = refOne.check(c, prog.limit)
		}
		for _, w := range []*Window{single, &shared.w} {
			w.Reset()
			for i, c := range seg {
				wasWide := w.Wide()
				var widened bool
				if w == single {
					got[i], widened = w.CheckFrom(qOf[i], c, prog.limit)
				} else {
					got[i], widened = shared.CheckFrom(qOf[i], c, prog.limit)
				}
				if widened != (!wasWide && w.Wide()) {
					t.Fatalf("%v segment %d: CheckFrom widened = %v, window wide %v → %v", pol, si, widened, wasWide, w.Wide())
				}
			}
			compare("CheckFrom", wantOne, got, w, &refOne)
		}

		// Batches as the input chose, from the input's queues, on the
		// single-owner and the shared window; the returned count must
		// match.
		batched.Reset()
		shared.Reset()
		gotShared := make([]bool, len(seg))
		start := 0
		for i := range seg {
			if !prog.ends[si][i] && i != len(seg)-1 {
				continue
			}
			q := prog.queues[si][start]
			wasWide := batched.Wide()
			n, widened := batched.CheckBatchFrom(q, seg[start:i+1], prog.limit, got[start:i+1])
			shared.CheckBatchFrom(q, seg[start:i+1], prog.limit, gotShared[start:i+1])
			if widened != (!wasWide && batched.Wide()) {
				t.Fatalf("%v segment %d: CheckBatchFrom widened = %v, window wide %v → %v", pol, si, widened, wasWide, batched.Wide())
			}
			wantN := 0
			for _, ok := range wantQ[start : i+1] {
				if ok {
					wantN++
				}
			}
			if n != wantN {
				t.Fatalf("%v segment %d: CheckBatchFrom(%d, %v) = %d, want %d", pol, si, q, seg[start:i+1], n, wantN)
			}
			start = i + 1
		}
		compare("CheckBatchFrom", wantQ, got, batched, refQ)
		compare("SharedWindow.CheckBatchFrom", wantQ, gotShared, &shared.w, refQ)

		// Batch boundaries at every position: every batch size up to 65.
		for size := 1; size <= min(len(seg), 65); size++ {
			chunked.Reset()
			for i := 0; i < len(seg); i += size {
				j := min(i+size, len(seg))
				chunked.CheckBatch(seg[i:j], prog.limit, got[i:j])
			}
			compare("CheckBatch/"+strconv.Itoa(size), want, got, chunked, ref)
		}
	}
	// A fresh window must agree with the reused ones on the last segment.
	var fresh Window
	fresh.SetPolicy(pol)
	for i, c := range lastSeg {
		if got := fresh.Check(c, prog.limit); got != lastWant[i] {
			t.Fatalf("%v fresh Window: Check(%d) at %d = %v, want %v", pol, c, i, got, lastWant[i])
		}
	}
}
