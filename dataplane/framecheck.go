package dataplane

import (
	"fmt"
	"sync/atomic"
)

// A frame freed twice (Free, Transmit or FreeFrames given a frame the
// caller no longer owns, or two copies of one Frame value each given
// back) puts its chunk on the free lists twice: two later allocations
// get the same buffer, and one packet's bytes are written over another's
// or sent in its place. Nothing sees it on the per-packet path: a check
// there would need a state per chunk, written on every allocation and
// every free (a shared cache line per packet, an atomic for queues on
// other CPUs), where a free now costs a store to the owner's cache. Built
// with the tag wgpio_framecheck (go test -tags wgpio_framecheck ./...),
// each pool keeps one bit per chunk, set while the chunk is out of the
// free lists (a caller's, or on a ring), and the allocation (Cache.Get,
// AllocFrame, AllocFrames, Pool.Get) of a chunk already out, or the free
// (Cache.Put, FreeFrames, Pool.Put, PutOne) of one already free, panics
// with the chunk's offset, at the call that broke the rule. Without the
// tag frameCheck is a constant false and the checks compile to nothing.
// The descriptor accounting of package dataplanetest finds the same at
// the end of a test (a chunk in two places).

// frameTrack is a pool's chunk bits under wgpio_framecheck; nil without.
type frameTrack struct {
	out   []atomic.Uint64 // bit i set: chunk i is out of the free lists
	shift uint            // log2 of the frame size
}

func newFrameTrack(nframes, frameSize int) *frameTrack {
	if !frameCheck {
		return nil
	}
	t := &frameTrack{out: make([]atomic.Uint64, (nframes+63)/64)}
	for 1<<t.shift < frameSize {
		t.shift++
	}
	return t
}

// take marks chunk out of the free lists, or panics if it was out.
func (t *frameTrack) take(chunk uint64) {
	i := chunk >> t.shift
	bit := uint64(1) << (i % 64)
	if t.out[i/64].Or(bit)&bit != 0 {
		panic(fmt.Sprintf("dataplane: chunk %#x allocated while in use (freed twice before, or freed while still in use)", chunk))
	}
}

// give marks chunk free, or panics if it was free.
func (t *frameTrack) give(chunk uint64) {
	i := chunk >> t.shift
	bit := uint64(1) << (i % 64)
	if t.out[i/64].And(^bit)&bit == 0 {
		panic(fmt.Sprintf("dataplane: frame of chunk %#x freed twice (Free, Transmit or FreeFrames was given a frame its caller no longer owned)", chunk))
	}
}
