//go:build linux

package afxdp

import (
	"sync/atomic"
	"unsafe"
)

// ring is one AF_XDP single-producer single-consumer ring of T (uint64 UMEM
// addresses for the fill and completion rings, descriptors for the RX and
// TX rings), laid out by the kernel (include/uapi/linux/if_xdp.h) as a
// 32-bit producer index, a 32-bit consumer index, a flags word and an array
// of size entries, size a power of 2. Indexes are free-running uint32 values
// that wrap around; entry i lives at i & mask, and prod - cons (mod 2^32) is
// the number of entries in the ring.
//
// Each side keeps a cached copy of the index it does not own, so that a
// burst reads the other side's index at most once and publishes its own
// index once. Memory ordering follows the kernel's rule for these rings
// (net/xdp/xsk_queue.h, "The structure of the shared state of the rings"):
// the producer writes entries, then store-releases prod; the consumer
// load-acquires prod, reads entries, then store-releases cons; the producer
// load-acquires cons before reusing a slot. Go's sync/atomic operations are
// sequentially consistent, which is at least acquire/release.
//
// A ring has one owner goroutine (the owner of the queue half using it).
type ring[T any] struct {
	prod  *uint32
	cons  *uint32
	flags *uint32
	descs []T // len(descs) = size
	mask  uint32
	size  uint32

	// cachedProd/cachedCons: the owner's view. A producer owns prod (the
	// value it will publish next is cachedProd) and caches cons; a consumer
	// owns cons (cachedCons) and caches prod.
	cachedProd uint32
	cachedCons uint32
}

// newRing returns a ring over the given shared words and entry array.
// len(descs) must be a power of 2.
func newRing[T any](prod, cons, flags *uint32, descs []T) *ring[T] {
	n := uint32(len(descs))
	r := &ring[T]{prod: prod, cons: cons, flags: flags, descs: descs, mask: n - 1, size: n}
	r.cachedProd = atomic.LoadUint32(prod)
	r.cachedCons = atomic.LoadUint32(cons)
	return r
}

// ringAt builds a ring over mmap'd memory mem with the kernel's offsets.
func ringAt[T any](mem []byte, prodOff, consOff, flagsOff, descOff uint64, n uint32) *ring[T] {
	base := unsafe.Pointer(&mem[0])
	descs := unsafe.Slice((*T)(unsafe.Add(base, descOff)), n)
	return newRing((*uint32)(unsafe.Add(base, prodOff)), (*uint32)(unsafe.Add(base, consOff)),
		(*uint32)(unsafe.Add(base, flagsOff)), descs)
}

// --- producer side (fill ring, TX ring) ---

// free returns how many entries the producer can reserve, at least want if
// possible: it reloads the consumer index only when the cached one does not
// show enough room.
func (r *ring[T]) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.cons) // acquire: the kernel is done with those slots
	return r.size - (r.cachedProd - r.cachedCons)
}

// slot returns the i-th entry past the cached producer index, for writing
// before submit.
func (r *ring[T]) slot(i uint32) *T { return &r.descs[(r.cachedProd+i)&r.mask] }

// consumed reloads the consumer index and returns it: the producer's
// entries before it are the consumer's no more.
func (r *ring[T]) consumed() uint32 {
	r.cachedCons = atomic.LoadUint32(r.cons) // acquire: as free's
	return r.cachedCons
}

// submit publishes n written entries.
func (r *ring[T]) submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.prod, r.cachedProd) // release: entries before index
}

// --- consumer side (RX ring, completion ring) ---

// avail returns how many entries are ready, reloading the producer index
// when the cached one shows fewer than want.
func (r *ring[T]) avail(want uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n >= want {
		return n
	}
	r.cachedProd = atomic.LoadUint32(r.prod) // acquire: entries are visible
	return r.cachedProd - r.cachedCons
}

// entry returns the i-th ready entry past the cached consumer index.
func (r *ring[T]) entry(i uint32) *T { return &r.descs[(r.cachedCons+i)&r.mask] }

// release gives n consumed entries back to the producer.
func (r *ring[T]) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.cons, r.cachedCons) // release: done reading entries
}

// needWakeup reports whether the kernel asks for a wakeup (sendto or poll)
// to process this ring (XDP_RING_NEED_WAKEUP, Linux 5.4).
func (r *ring[T]) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&xdpRingNeedWakeup != 0
}

// pending is the number of entries the producer published that the
// consumer has not released, as seen from the shared indexes.
func (r *ring[T]) pending() uint32 {
	return atomic.LoadUint32(r.prod) - atomic.LoadUint32(r.cons)
}
