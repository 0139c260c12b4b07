package replay

import (
	"fmt"
	"sync"
	"unsafe"
)

// Implementation choices.
const (
	blockShift = 6               // log2 of the bits in a block
	blockBits  = 1 << blockShift // bits in one block of the ring
	bitMask    = blockBits - 1

	wideBlocks   = 2048 // blocks in the wide ring; a power of 2
	narrowBlocks = 128  // blocks in the narrow ring; a power of 2

	// WindowSize is the number of counters below the highest accepted one
	// that the wide window still remembers: (2048 - 1) blocks of 64 bits,
	// 131,008 counters. A counter c is too old when highest - c > the
	// window's size.
	WindowSize = (wideBlocks - 1) * blockBits
	// NarrowWindowSize is the narrow window's size: (128 - 1) blocks of 64
	// bits, 8,128 counters, the width of the Linux kernel's and
	// wireguard-go's windows (drivers/net/wireguard/messages.h
	// COUNTER_WINDOW_SIZE).
	NarrowWindowSize = (narrowBlocks - 1) * blockBits
	// WidenDepth is the reordering that makes an adaptive window widen: a
	// counter accepted more than WidenDepth (half the narrow window, 4,064)
	// below the highest.
	WidenDepth = NarrowWindowSize / 2
)

// AnyQueue is the queue of a batch received on no queue of its own (a
// datagram reassembled from IP fragments, which a NIC hashes on addresses
// alone and may put on another queue than the session's whole datagrams,
// or the host kernel reassembled): [Window.CheckBatchFrom] takes it for the
// queue of the window's first batch, never for a second queue's, and a
// window's first batch of AnyQueue leaves its first queue unset.
const AnyQueue = -1

// Policy chooses a window's width.
type Policy uint8

const (
	// Auto starts narrow (NarrowWindowSize, about 1 KiB) and widens to
	// WindowSize (16 KiB more, allocated once) on the first of two causes:
	// a counter accepted from a second queue ([Window.CheckBatchFrom]),
	// or a counter accepted more than [WidenDepth] below the highest. Both
	// precede loss while the lag between queues is within the narrow
	// window; a second queue whose first counters come further behind is
	// rejected until it catches up, as the narrow window rejects them. A
	// rejected counter never widens the window. Widening sets a floor, so that no counter the narrow window
	// forgot can be accepted a second time: the start of the block (of 64
	// counters) after the last block the narrow ring dropped with an
	// accepted counter in it. Nothing below the floor is accepted after
	// widening; at or above it the wide window knows every counter the
	// narrow one accepted.
	Auto Policy = iota
	// Narrow is the kernel's window (NarrowWindowSize), never widened:
	// the verdicts of Linux's and wireguard-go's replay counters.
	Narrow
	// Wide is the wide window (WindowSize) from the start.
	Wide
)

// ParsePolicy parses a policy as written in configuration: "auto", "8128"
// (Narrow) or "131008" (Wide).
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "auto":
		return Auto, nil
	case "8128":
		return Narrow, nil
	case "131008":
		return Wide, nil
	}
	return Auto, fmt.Errorf("replay window %q: want auto, 8128 or 131008", s)
}

// String returns the policy as ParsePolicy reads it.
func (p Policy) String() string {
	switch p {
	case Auto:
		return "auto"
	case Narrow:
		return "8128"
	case Wide:
		return "131008"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// A Window remembers which of the most recent counters of one keypair were
// accepted (RFC 6479), on a ring of NarrowWindowSize or WindowSize counters
// chosen by its Policy.
//
// The zero value is an empty Auto window ready to use: it occupies about
// 1 KiB, and 16 KiB more once widened. A Window has a single owner: it is
// not safe for concurrent use (see [SharedWindow]), and must not be copied
// after first use. Check counters only after the packet was authenticated;
// see the package documentation.
type Window struct {
	last uint64 // highest counter accepted (0 when empty)
	// floor: counters below it are rejected. 0 but after widening (see
	// widen).
	floor uint64
	// forgot is 1 + the highest block the narrow ring dropped while it held
	// an accepted counter (0: none): every counter ever accepted in a block
	// at or above it is still in the narrow ring.
	forgot uint64
	// wide is the wide ring, nil while narrow; once set it is the ring.
	wide   *[wideBlocks]uint64
	policy Policy
	// queue is 1 + the queue of the first CheckBatchFrom (0: none yet).
	queue uint32
	// needed: the window, wide, accepted a counter more than
	// NarrowWindowSize below the highest, one the narrow window would
	// have rejected (Needed).
	needed bool
	// narrow is the ring while wide is nil: bit c&63 of block
	// (c>>6)&(narrowBlocks-1) is counter c (likewise in the wide ring).
	narrow [narrowBlocks]uint64
}

// SetPolicy empties the window and gives it policy p (Wide allocates the
// wide ring now).
func (w *Window) SetPolicy(p Policy) {
	w.policy = p
	w.Reset()
}

// Policy returns the window's policy.
func (w *Window) Policy() Policy { return w.policy }

// Needed reports whether the window accepted a counter only a wide window
// accepts: more than NarrowWindowSize below the highest accepted before
// it. The session's packets then arrive further apart than the kernel's
// window holds (queues that lag each other), and the narrow window would
// have lost that counter: a caller may start the peer's next session
// wide (a new session's first packets from the lagging queue arrive too
// old for a narrow window, and a rejected counter never widens it).
func (w *Window) Needed() bool { return w.needed }

// Wide reports whether the window is wide (WindowSize): always for Wide,
// never for Narrow, once widened for Auto.
func (w *Window) Wide() bool { return w.wide != nil }

// Reset empties the window, as when a keypair is installed, and makes an
// Auto window narrow again (dropping its wide ring). It takes constant
// time: only the block holding counter 0 is cleared, because every other
// block is cleared by the window moving forward before it is used.
func (w *Window) Reset() {
	w.last, w.floor, w.forgot, w.queue, w.needed = 0, 0, 0, 0, false
	w.narrow[0] = 0
	switch {
	case w.policy == Wide && w.wide == nil:
		w.wide = new([wideBlocks]uint64)
	case w.policy == Wide:
		w.wide[0] = 0
	default:
		w.wide = nil
	}
}

// widen switches an Auto window from the narrow ring to the wide one. The
// narrow ring's blocks are copied to the same blocks of the wide ring (a
// counter's block is its counter >> 6 in both, only the ring slot differs),
// and the floor is set to the first counter of block w.forgot: the narrow
// ring dropped no block at or above it that held an accepted counter, so
// every counter accepted there is in the copied blocks or was never seen
// (a block the narrow ring dropped empty had none accepted, and can have
// none later, being too old for it). Counters below the floor may have been
// accepted and forgotten: they stay rejected.
func (w *Window) widen() {
	wide := new([wideBlocks]uint64)
	hi := w.last >> blockShift
	// The narrow ring holds blocks hi-narrowBlocks+1 .. hi (those below
	// block 0 do not exist); the wide ring's other slots stay zero, which
	// is what the RFC 6479 ring needs of blocks not yet entered.
	for k := uint64(0); k < narrowBlocks && k <= hi; k++ {
		b := hi - k
		wide[b&(wideBlocks-1)] = w.narrow[b&(narrowBlocks-1)]
	}
	w.floor = w.forgot << blockShift
	w.wide = wide
}

// Check reports whether counter is accepted, and if so records it. counter
// is the 64-bit counter of an authenticated transport data message
// (whitepaper section 5.4.6); limit is exclusive, normally WireGuard's
// protocol.RejectAfterMessages. A counter is rejected if counter >= limit,
// if it was accepted before, if it is more than the window's size
// (NarrowWindowSize or [WindowSize]) below the highest counter accepted so
// far, or if it is below the floor set by widening. A rejected counter
// leaves the window unchanged.
func (w *Window) Check(counter, limit uint64) bool {
	var acc [1]bool
	w.CheckBatch([]uint64{counter}, limit, acc[:])
	return acc[0]
}

// checkLen panics unless accepted is at least as long as counters (its
// capacity does not count: the caller reads accepted up to its length).
func checkLen(counters []uint64, accepted []bool) {
	if len(accepted) < len(counters) {
		panic("replay: accepted shorter than counters")
	}
}

// CheckBatch checks counters[i] in order, as if by Check, and sets
// accepted[i] to the result; it returns how many were accepted. A counter
// that appears twice in one batch is accepted at most once, exactly as across
// two calls. accepted must be at least as long as counters (CheckBatch
// panics otherwise, before it checks any, whatever accepted's capacity);
// neither slice is kept after the call. It does not
// allocate, but for the wide ring when an Auto window widens (once).
func (w *Window) CheckBatch(counters []uint64, limit uint64, accepted []bool) int {
	checkLen(counters, accepted)
	accepted = accepted[:len(counters)]
	if w.inOrder(counters, limit) {
		return w.checkInOrder(counters, accepted)
	}
	ring, size := w.ring()
	mask := uint64(len(ring) - 1)
	last, floor := w.last, w.floor
	n := 0
	for i, c := range counters {
		ok := false
		if c < limit && c >= floor && (c > last || last-c <= size) {
			if c > last {
				if c>>blockShift != last>>blockShift {
					w.advance(ring, last>>blockShift, c>>blockShift)
				}
				last = c
			}
			p := &ring[(c>>blockShift)&mask]
			bit := uint64(1) << (c & bitMask)
			old := *p
			*p = old | bit
			ok = old&bit == 0
			if ok && last-c > NarrowWindowSize {
				w.needed = true // only a wide window gets here
			}
			if ok && last-c > WidenDepth && w.policy == Auto && w.wide == nil {
				// Reordering this deep precedes loss: widen now, after
				// accepting c (the narrow window judged it).
				w.last = last
				w.widen()
				ring, size = w.ring()
				mask = uint64(len(ring) - 1)
				floor = w.floor
			}
		}
		accepted[i] = ok
		if ok {
			n++
		}
	}
	w.last = last
	return n
}

// inOrder reports whether counters is the usual batch of one session on
// one queue: two or more consecutive counters, all above the highest
// accepted so far, at or above the floor and below limit.
func (w *Window) inOrder(counters []uint64, limit uint64) bool {
	n := len(counters)
	if n < 2 {
		return false
	}
	first, end := counters[0], counters[n-1]
	if first <= w.last || first < w.floor || end-first != uint64(n-1) || end < first || end >= limit {
		return false
	}
	for i, c := range counters {
		if c != first+uint64(i) {
			return false
		}
	}
	return true
}

// checkInOrder is CheckBatch for a batch inOrder accepted: the same
// verdicts and the same window after, with a bit mask per block of the
// ring instead of a bit per counter. Each counter is above the highest
// before it, so the window moves as the loop of CheckBatch moves it
// (advance at each new block) and never widens for depth.
func (w *Window) checkInOrder(counters []uint64, accepted []bool) int {
	ring, _ := w.ring()
	mask := uint64(len(ring) - 1)
	first, end := counters[0], counters[len(counters)-1]
	last := w.last
	n := 0
	for c := first; ; {
		b := c >> blockShift
		if b != last>>blockShift {
			w.advance(ring, last>>blockShift, b)
		}
		hi := min(end, b<<blockShift|bitMask) // the last counter in this block
		bits := ^uint64(0) >> (bitMask - hi&bitMask) &^ (1<<(c&bitMask) - 1)
		p := &ring[b&mask]
		old := *p
		*p = old | bits
		acc := accepted[c-first : hi-first+1]
		if old&bits == 0 { // the usual block: none seen before
			for j := range acc {
				acc[j] = true
			}
			n += len(acc)
		} else {
			for j := range acc {
				acc[j] = old>>((c+uint64(j))&bitMask)&1 == 0
				if acc[j] {
					n++
				}
			}
		}
		last = hi
		if hi == end {
			break
		}
		c = hi + 1
	}
	w.last = last
	return n
}

// CheckBatchFrom is CheckBatch for a batch received on queue (a NIC RX
// queue, any number the caller keeps stable). An Auto window widens before
// the batch when queue is not the queue of its first CheckBatchFrom and the
// batch holds a counter the widened window accepts: a keypair decrypted on
// two queues sees their packets interleave out of order, while a batch of
// replays (all rejected) from another queue changes nothing. widened
// reports whether this call widened the window (for either cause). A
// batch of AnyQueue is taken as from the first queue.
func (w *Window) CheckBatchFrom(queue int, counters []uint64, limit uint64, accepted []bool) (n int, widened bool) {
	narrow := w.wide == nil
	q := uint32(queue) + 1
	if queue != AnyQueue && w.queue != q {
		if w.queue == 0 {
			w.queue = q
		} else if w.policy == Auto && narrow && w.freshIfWide(counters, limit) {
			w.widen()
		}
	}
	n = w.CheckBatch(counters, limit, accepted)
	return n, narrow && w.wide != nil
}

// CheckFrom is CheckBatchFrom for a batch of the one counter c: ok reports
// whether c is accepted. The usual message of an in-order session (a
// concentrator's peer sends one at a time, each a burst of its own) is
// the newest counter yet, from the queue of the window's first batch: it
// takes a path of its own, without the batch's loop and checks. The
// verdict, the window after and widened are those of CheckBatchFrom with
// []uint64{c} in every case.
func (w *Window) CheckFrom(queue int, c, limit uint64) (ok, widened bool) {
	if w.queue == uint32(queue)+1 && c > w.last && c < limit && c >= w.floor {
		// Above the newest: never accepted before (the blocks the
		// window enters are cleared), no reordering to widen for.
		ring, _ := w.ring()
		b, cur := c>>blockShift, w.last>>blockShift
		if b != cur {
			w.advance(ring, cur, b)
		}
		ring[b&uint64(len(ring)-1)] |= 1 << (c & bitMask)
		w.last = c
		return true, false
	}
	counters, accepted := [1]uint64{c}, [1]bool{}
	_, widened = w.CheckBatchFrom(queue, counters[:], limit, accepted[:])
	return accepted[0], widened
}

// freshIfWide reports whether a narrow window, widened now, would accept
// one of counters (checked each against the present state: the first such
// counter is accepted whatever the ones before it were, since they are
// rejected and leave the window as it is).
func (w *Window) freshIfWide(counters []uint64, limit uint64) bool {
	floor := w.forgot << blockShift
	hi := w.last >> blockShift
	for _, c := range counters {
		switch {
		case c >= limit || c < floor:
		case c > w.last:
			return true
		case w.last-c > WindowSize:
		case (c>>blockShift)+narrowBlocks <= hi:
			// In a block the narrow ring dropped, at or above the floor:
			// it was dropped with no counter accepted.
			return true
		case w.narrow[(c>>blockShift)&(narrowBlocks-1)]&(1<<(c&bitMask)) == 0:
			return true
		}
	}
	return false
}

// ring returns the ring in use and the window's size in counters.
func (w *Window) ring() ([]uint64, uint64) {
	if w.wide != nil {
		return w.wide[:], WindowSize
	}
	return w.narrow[:], NarrowWindowSize
}

// advance clears the blocks of ring (a power of 2 long) that the window
// enters when the highest block moves from cur to next (next > cur): blocks
// cur+1 through next, or the whole ring if that is more than the ring holds
// (RFC 6479). On the narrow ring it first notes in w.forgot the highest
// block it drops that holds an accepted counter (the floor if the window
// widens later).
func (w *Window) advance(ring []uint64, cur, next uint64) {
	blocks := uint64(len(ring))
	mask := blocks - 1
	diff := next - cur
	if w.wide == nil && next >= narrowBlocks {
		// The ring holds blocks cur-narrowBlocks+1 .. cur (those >= 0, all
		// entered in this session); the move drops those below
		// next-narrowBlocks+1. Look for the highest dropped one with a bit
		// set, down to what w.forgot already covers.
		top := min(cur, next-narrowBlocks) + 1 // 1 + the highest dropped
		var bottom uint64                      // the lowest dropped
		if cur >= narrowBlocks {
			bottom = cur - narrowBlocks + 1
		}
		for ob := top; ob > bottom && ob > w.forgot; ob-- {
			if ring[(ob-1)&mask] != 0 {
				w.forgot = ob
				break
			}
		}
	}
	if diff == 1 { // the usual case: in order, into the next block
		ring[next&mask] = 0
		return
	}
	if diff >= blocks {
		clear(ring)
		return
	}
	start := (cur + 1) & mask
	end := start + diff
	if end <= blocks {
		clear(ring[start:end])
		return
	}
	clear(ring[start:])
	clear(ring[:end-blocks])
}

// A SharedWindow is a [Window] behind a mutex, for a keypair whose packets
// are decrypted on several queues at once. Widening (Auto) happens under the
// same lock, inside the call that finds the cause.
//
// The zero value is an empty Auto window ready to use. It is safe for
// concurrent use; each call takes the lock once, so a batch of counters
// costs one lock. A SharedWindow must not be copied after first use.
type SharedWindow struct {
	mu sync.Mutex
	w  Window // guarded by mu
}

// SetPolicy is [Window.SetPolicy] under the lock.
func (s *SharedWindow) SetPolicy(p Policy) {
	s.mu.Lock()
	s.w.SetPolicy(p)
	s.mu.Unlock()
}

// Needed is [Window.Needed] under the lock.
func (s *SharedWindow) Needed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Needed()
}

// Wide is [Window.Wide] under the lock.
func (s *SharedWindow) Wide() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Wide()
}

// FirstQueue returns the queue of the window's first CheckBatchFrom or
// CheckFrom (ok false: none yet), under the lock: the queue whose
// counters the window judges as in order. A caller that hands a
// keypair's packets to a queue other than the one they arrived on (a
// datagram the host's kernel reassembled) hands them to this one, so that
// they are not taken for a second queue's (which widens an Auto window).
func (s *SharedWindow) FirstQueue() (queue int, ok bool) {
	s.mu.Lock()
	q := s.w.queue
	s.mu.Unlock()
	return int(q) - 1, q != 0
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
	checkLen(counters, accepted) // panic, if at all, before locking
	s.mu.Lock()
	n := s.w.CheckBatch(counters, limit, accepted)
	s.mu.Unlock()
	return n
}

// CheckBatchFrom is [Window.CheckBatchFrom] under the lock, taken once for
// the whole batch.
func (s *SharedWindow) CheckBatchFrom(queue int, counters []uint64, limit uint64, accepted []bool) (n int, widened bool) {
	checkLen(counters, accepted) // panic, if at all, before locking
	s.mu.Lock()
	n, widened = s.w.CheckBatchFrom(queue, counters, limit, accepted)
	s.mu.Unlock()
	return n, widened
}

// CheckFrom is [Window.CheckFrom] under the lock.
func (s *SharedWindow) CheckFrom(queue int, c, limit uint64) (ok, widened bool) {
	s.mu.Lock()
	ok, widened = s.w.CheckFrom(queue, c, limit)
	s.mu.Unlock()
	return ok, widened
}

// Lines returns the addresses of the memory a check of counter c on s
// begins with: s itself (its lock and the window's state, in one 64-byte
// line when s is so aligned) and the block of the narrow ring that holds c.
// It is for a caller that has the lines of many windows loaded at once
// (prefetched) before it checks each, as a fast-path worker does for a
// burst from many sessions. It reads nothing of the window and takes no
// lock: once widened, c's block lies in the wide ring, and the second
// address names a line the check does not use.
func (s *SharedWindow) Lines(c uint64) (head, block unsafe.Pointer) {
	return unsafe.Pointer(s), unsafe.Pointer(&s.w.narrow[(c>>blockShift)&(narrowBlocks-1)])
}
