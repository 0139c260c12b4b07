package replay

import "sync"

// Implementation choices.
const (
	blockShift = 6               // log2 of the bits in a block
	blockBits  = 1 << blockShift // bits in one block of the ring
	bitMask    = blockBits - 1

	ringBlocks = 2048 // blocks in the ring; a power of 2
	blockMask  = ringBlocks - 1

	// WindowSize is the number of counters below the highest accepted one
	// that the window still remembers: (2048 - 1) blocks of 64 bits, 131,008
	// counters. A counter c is too old when highest - c > WindowSize.
	WindowSize = (ringBlocks - 1) * blockBits
)

// A Window remembers which of the most recent counters of one keypair were
// accepted (RFC 6479).
//
// The zero value is an empty window ready to use; it occupies 16 KiB plus
// one word. A Window has a single owner: it is not safe for concurrent use
// (see [SharedWindow]). Check counters only after the packet was
// authenticated; see the package documentation.
type Window struct {
	last uint64             // highest counter accepted (0 when empty)
	ring [ringBlocks]uint64 // bit c&63 of block (c>>6)&blockMask is counter c
}

// Reset empties the window, as when a keypair is installed. It takes
// constant time: only the block holding counter 0 is cleared, because every
// other block is cleared by the window moving forward before it is used.
func (w *Window) Reset() {
	w.last = 0
	w.ring[0] = 0
}

// Check reports whether counter is accepted, and if so records it. counter
// is the 64-bit counter of an authenticated transport data message
// (whitepaper section 5.4.6); limit is exclusive, normally WireGuard's
// protocol.RejectAfterMessages. A counter is rejected if counter >= limit,
// if it was accepted before, or if it is more than [WindowSize] below the
// highest counter accepted so far. A rejected counter leaves the window
// unchanged.
func (w *Window) Check(counter, limit uint64) bool {
	if counter >= limit {
		return false
	}
	if counter > w.last {
		if counter>>blockShift != w.last>>blockShift {
			w.advance(w.last>>blockShift, counter>>blockShift)
		}
		w.last = counter
	} else if w.last-counter > WindowSize {
		return false
	}
	p := &w.ring[(counter>>blockShift)&blockMask]
	bit := uint64(1) << (counter & bitMask)
	old := *p
	*p = old | bit
	return old&bit == 0
}

// CheckBatch checks counters[i] in order, as if by Check, and sets
// accepted[i] to the result; it returns how many were accepted. A counter
// that appears twice in one batch is accepted at most once, exactly as across
// two calls. accepted must be at least as long as counters (CheckBatch
// panics otherwise); neither slice is kept after the call. It does not
// allocate.
func (w *Window) CheckBatch(counters []uint64, limit uint64, accepted []bool) int {
	accepted = accepted[:len(counters)]
	last := w.last
	n := 0
	for i, c := range counters {
		ok := false
		if c < limit && (c > last || last-c <= WindowSize) {
			if c > last {
				if c>>blockShift != last>>blockShift {
					w.advance(last>>blockShift, c>>blockShift)
				}
				last = c
			}
			p := &w.ring[(c>>blockShift)&blockMask]
			bit := uint64(1) << (c & bitMask)
			old := *p
			*p = old | bit
			ok = old&bit == 0
		}
		accepted[i] = ok
		if ok {
			n++
		}
	}
	w.last = last
	return n
}

// advance clears the blocks that the window enters when the highest block
// moves from cur to next (next > cur): blocks cur+1 through next, or the
// whole ring if that is more than the ring holds (RFC 6479).
func (w *Window) advance(cur, next uint64) {
	diff := next - cur
	if diff == 1 { // the usual case: in order, into the next block
		w.ring[next&blockMask] = 0
		return
	}
	if diff >= ringBlocks {
		clear(w.ring[:])
		return
	}
	start := (cur + 1) & blockMask
	end := start + diff
	if end <= ringBlocks {
		clear(w.ring[start:end])
		return
	}
	clear(w.ring[start:])
	clear(w.ring[:end-ringBlocks])
}

// A SharedWindow is a [Window] behind a mutex, for a keypair whose packets
// are decrypted on several queues at once.
//
// The zero value is an empty window ready to use. It is safe for concurrent
// use; each call takes the lock once, so a batch of counters costs one lock.
// A SharedWindow must not be copied after first use.
type SharedWindow struct {
	mu sync.Mutex
	w  Window // guarded by mu
}

// Reset empties the window, as [Window.Reset].
func (s *SharedWindow) Reset() {
	s.mu.Lock()
	s.w.Reset()
	s.mu.Unlock()
}

// Check is [Window.Check] under the lock.
func (s *SharedWindow) Check(counter, limit uint64) bool {
	s.mu.Lock()
	ok := s.w.Check(counter, limit)
	s.mu.Unlock()
	return ok
}

// CheckBatch is [Window.CheckBatch] under the lock, taken once for the whole
// batch. Concurrent batches are serialised: each is checked as if alone.
func (s *SharedWindow) CheckBatch(counters []uint64, limit uint64, accepted []bool) int {
	accepted = accepted[:len(counters)] // panic, if at all, before locking
	s.mu.Lock()
	n := s.w.CheckBatch(counters, limit, accepted)
	s.mu.Unlock()
	return n
}
