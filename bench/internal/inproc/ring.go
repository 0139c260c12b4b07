//go:build linux

package inproc

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/wgpio/wgpio/dataplane"
)

// slotSize is the bytes of one ring slot: an outer WireGuard datagram of a
// 1420-byte inner packet (1420 + 32) fits, with room to spare.
const slotSize = 2048

// ringSize is the number of slots of every ring of the doubles (a power of
// 2): room for a few milliseconds of packets at the rates measured, so that
// a consumer descheduled for a time slice on a busy machine does not make
// the ring overflow (memport's rings get the same room, memRingSize per
// queue pair).
const ringSize = 8192

// slot is one packet buffer of a ring.
type slot struct {
	n   int
	buf [slotSize]byte
}

// ring is a bounded multi-producer, single-consumer queue of packets,
// batched: a producer reserves a range of slots with one compare-and-swap,
// fills them, and publishes the range with one store once every earlier
// range is published (commit order = reservation order); the consumer
// takes every published slot with one load and releases them with one
// store. No lock, no allocation. Indexes run free over uint64 and are
// masked into the slots (ringSize is a power of 2).
//
// Memory order: a producer's plain writes to its slots happen before its
// store of committed (Go's atomics are sequentially consistent, "The Go
// Memory Model", Atomic Values), and the consumer reads slots only below
// the committed value it loaded; likewise the consumer's reads happen
// before its store of tail, which producers load before reusing a slot.
//
// Waking: a consumer with nothing to take sets sleeping and parks on wake;
// a producer that commits and sees sleeping sends one token (non-blocking),
// so a busy consumer costs producers one atomic load per batch.
type ring struct {
	slots []slot
	_     [64]byte
	head  atomic.Uint64 // next slot to reserve (producers)
	_     [56]byte
	done  atomic.Uint64 // end of the published slots
	_     [56]byte
	tail  atomic.Uint64 // next slot to consume (the consumer)
	_     [56]byte
	// sleeping is set by the consumer before it parks on wake.
	sleeping atomic.Bool
	wake     chan struct{}
	closed   chan struct{}
	shut     sync.Once
	// dropped counts packets a producer could not place (ring full).
	dropped atomic.Uint64
}

func newRing() *ring {
	// The slots get the memory the memport pools get (huge pages where
	// the kernel gives them, dataplane.AllocMemory), so that the doubles
	// pay no TLB misses the ports do not. A slot holds no pointers, so
	// the bytes may back it.
	mem := dataplane.AllocMemory(ringSize * int(unsafe.Sizeof(slot{})))
	slots := unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), ringSize)
	r := &ring{slots: slots, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	for i := range r.slots {
		prefault(r.slots[i].buf[:])
	}
	return r
}

// prefault writes one byte of every page of b, so that the page faults of
// fresh memory (tens of milliseconds per batch on a busy machine) happen
// before anything is measured, not in the first steps.
func prefault(b []byte) {
	for i := 0; i < len(b); i += pageSize {
		b[i] = 0
	}
}

var pageSize = os.Getpagesize()

// reserve claims up to n free slots and returns the first index and the
// count (0 if the ring is full). The caller fills slots [first, first+k)
// through at and must then call commit(first, k).
func (r *ring) reserve(n int) (first uint64, k int) {
	for {
		h := r.head.Load()
		free := ringSize - int(h-r.tail.Load())
		k = min(n, free)
		if k <= 0 {
			return h, 0
		}
		if r.head.CompareAndSwap(h, h+uint64(k)) {
			return h, k
		}
	}
}

// at returns slot i (a free-running index).
func (r *ring) at(i uint64) *slot { return &r.slots[i&(ringSize-1)] }

// commit publishes slots [first, first+k) once every earlier reservation
// is published, and wakes a sleeping consumer.
func (r *ring) commit(first uint64, k int) {
	for !r.done.CompareAndSwap(first, first+uint64(k)) {
		// An earlier producer is still filling its range (rare: only
		// control messages race with the data sender).
		runtime.Gosched()
	}
	if r.sleeping.Load() {
		r.sleeping.Store(false)
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// put copies pkts into the ring, as many as fit; the rest are counted as
// dropped. It returns how many it placed.
func (r *ring) put(pkts [][]byte, offset int) int {
	first, k := r.reserve(len(pkts))
	for i := range k {
		s := r.at(first + uint64(i))
		s.n = copy(s.buf[:], pkts[i][offset:])
	}
	if k > 0 {
		r.commit(first, k)
	}
	if d := len(pkts) - k; d > 0 {
		r.dropped.Add(uint64(d))
	}
	return k
}

// avail returns the first unconsumed index and how many published slots
// follow it (up to n), without blocking. Consumer only.
func (r *ring) avail(n int) (first uint64, k int) {
	t := r.tail.Load()
	return t, min(n, int(r.done.Load()-t))
}

// release hands k consumed slots back to the producers. Consumer only.
func (r *ring) release(k int) { r.tail.Add(uint64(k)) }

// wait returns the first unconsumed index and the count of published
// slots (1 to n), blocking until there is one, or ok = false once the
// ring or stop (nil: never) is closed. Consumer only.
func (r *ring) wait(n int, stop <-chan struct{}) (first uint64, k int, ok bool) {
	for spin := 0; ; spin++ {
		if first, k = r.avail(n); k > 0 {
			return first, k, true
		}
		if spin == 0 {
			runtime.Gosched()
			continue
		}
		r.sleeping.Store(true)
		if first, k = r.avail(n); k > 0 {
			r.sleeping.Store(false)
			return first, k, true
		}
		select {
		case <-r.wake:
		case <-r.closed:
			return 0, 0, false
		case <-stop:
			return 0, 0, false
		}
	}
}

// get copies up to len(bufs) packets out of the ring into bufs at offset,
// blocking until there is at least one, and sets sizes. It returns
// ok = false once the ring or stop is closed. Consumer only.
func (r *ring) get(bufs [][]byte, sizes []int, offset int, stop <-chan struct{}) (n int, ok bool) {
	first, k, ok := r.wait(len(bufs), stop)
	if !ok {
		return 0, false
	}
	for i := range k {
		s := r.at(first + uint64(i))
		sizes[i] = copy(bufs[i][offset:], s.buf[:s.n])
	}
	r.release(k)
	return k, true
}

// close wakes the consumer for good.
func (r *ring) close() { r.shut.Do(func() { close(r.closed) }) }
