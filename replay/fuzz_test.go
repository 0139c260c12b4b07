package replay

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// refWindow is the slow, obvious reference: the set of every counter ever
// accepted, and the highest one. It follows the rules of the whitepaper
// (section 5.4.6) with our width, and nothing of the ring.
type refWindow struct {
	seen map[uint64]bool
	last uint64 // highest accepted; 0 when empty, as in WireGuard
}

func (r *refWindow) reset() {
	r.seen = map[uint64]bool{}
	r.last = 0
}

func (r *refWindow) check(c, limit uint64) bool {
	switch {
	case c >= limit:
		return false
	case c < r.last && r.last-c > WindowSize:
		return false // too old
	case r.seen[c]:
		return false // replay
	}
	r.seen[c] = true
	r.last = max(r.last, c)
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
// far), bit 3 ends the batch after it, and the value 0xff resets the window.
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
	for len(data) > 0 {
		op := next(1)[0]
		if op == opReset {
			p.segments = append(p.segments, nil)
			p.ends = append(p.ends, nil)
			hi = 0
			continue
		}
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
	// A limit of WindowSize+1 with the edge counters.
	f.Add(seed(5, opAbsolute, 0xc0, 0xff, 1, 0, 0, 0, 0, 0, opForward, 0, opRepeat, 1))

	var (
		single, batched, chunked Window
		shared                   SharedWindow
		ref                      refWindow
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := decode(data)
		var lastSeg []uint64
		var lastWant []bool
		for si, seg := range p.segments {
			ref.reset()
			want := make([]bool, len(seg))
			for i, c := range seg {
				want[i] = ref.check(c, p.limit)
			}
			lastSeg, lastWant = seg, want
			compare := func(name string, got []bool, last uint64) {
				t.Helper()
				for i := range seg {
					if got[i] != want[i] {
						t.Fatalf("segment %d: %s: check(%d) at %d = %v, want %v (limit %d)", si, name, seg[i], i, got[i], want[i], p.limit)
					}
				}
				if last != ref.last {
					t.Fatalf("segment %d: %s: newest = %d, want %d", si, name, last, ref.last)
				}
			}

			// One at a time, on a window reused (Reset, not fresh).
			single.Reset()
			got := make([]bool, len(seg))
			for i, c := range seg {
				got[i] = single.Check(c, p.limit)
			}
			compare("Check", got, single.last)

			// Batches as the input chose, on the single-owner and the
			// shared window; the returned count must match.
			batched.Reset()
			shared.Reset()
			gotShared := make([]bool, len(seg))
			start := 0
			for i := range seg {
				if !p.ends[si][i] && i != len(seg)-1 {
					continue
				}
				n := batched.CheckBatch(seg[start:i+1], p.limit, got[start:i+1])
				shared.CheckBatch(seg[start:i+1], p.limit, gotShared[start:i+1])
				wantN := 0
				for _, ok := range want[start : i+1] {
					if ok {
						wantN++
					}
				}
				if n != wantN {
					t.Fatalf("segment %d: CheckBatch(%v) = %d, want %d", si, seg[start:i+1], n, wantN)
				}
				start = i + 1
			}
			compare("CheckBatch", got, batched.last)
			compare("SharedWindow.CheckBatch", gotShared, shared.w.last)

			// Batch boundaries at every position: every batch size up to 65.
			for size := 1; size <= min(len(seg), 65); size++ {
				chunked.Reset()
				for i := 0; i < len(seg); i += size {
					j := min(i+size, len(seg))
					chunked.CheckBatch(seg[i:j], p.limit, got[i:j])
				}
				compare("CheckBatch/"+strconv.Itoa(size), got, chunked.last)
			}
		}
		// A fresh window must agree with the reused ones on the last
		// segment.
		var fresh Window
		for i, c := range lastSeg {
			if got := fresh.Check(c, p.limit); got != lastWant[i] {
				t.Fatalf("fresh Window: Check(%d) at %d = %v, want %v", c, i, got, lastWant[i])
			}
		}
	})
}
