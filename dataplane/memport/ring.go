package memport

import "sync/atomic"

// desc is one descriptor on a ring, shaped like the kernel's struct xdp_desc
// (include/uapi/linux/if_xdp.h): the address of the first data byte in the
// receiving port's pool and the data length in bytes.
type desc struct {
	addr uint64
	len  uint32
	_    uint32 // options in xdp_desc; unused
}

// cacheLine is the assumed size of a CPU cache line in bytes, for padding.
const cacheLine = 64

// ring is a single-producer, single-consumer ring of descriptors in plain
// memory, laid out like an AF_XDP ring (Documentation/networking/af_xdp.rst):
// a power-of-2 array of slots and two free-running 32-bit indexes, prod
// (written only by the producer) and cons (written only by the consumer).
// Slot i is desc[i & mask]; the ring holds prod - cons entries (mod 2^32),
// so it is empty when prod == cons and full when prod - cons == size. The
// indexes wrap at 2^32 with no special case because size divides 2^32.
//
// Memory ordering. The producer writes slots with plain stores and then
// publishes them with one atomic store of prod; the consumer loads prod
// atomically and only then reads the slots below it. Symmetrically the
// consumer reads slots, then stores cons atomically, and the producer
// overwrites a slot only after loading a cons past it. Go's atomics are
// sequentially consistent and an atomic load that observes an atomic store
// is synchronized after it (The Go Memory Model, "Atomic Values",
// https://go.dev/ref/mem#atomic), which gives the same guarantees as the
// kernel's smp_store_release/smp_load_acquire pairs on AF_XDP rings
// (net/xdp/xsk_queue.h, the comment above xskq_cons_read_addr_unchecked).
type ring struct {
	prod atomic.Uint32
	_    [cacheLine - 4]byte
	cons atomic.Uint32
	_    [cacheLine - 4]byte

	mask uint32
	desc []desc
}

// newRing returns an empty ring of size slots (a power of 2) whose indexes
// start at start (tests start near 2^32 to cross the wrap).
func newRing(size int, start uint32) *ring {
	r := &ring{mask: uint32(size - 1), desc: make([]desc, size)}
	r.prod.Store(start)
	r.cons.Store(start)
	return r
}

// producer is the producer's view of a ring: its private index, which runs
// ahead of the published prod during a burst, and a cached copy of cons so
// that the shared cache line is read only when the cached copy says the ring
// is too full. Owned by one goroutine.
type producer struct {
	r          *ring
	desc       []desc
	mask       uint32
	prod       uint32 // next slot to fill; published by publish
	cachedCons uint32
}

func newProducer(r *ring) producer {
	return producer{r: r, desc: r.desc, mask: r.mask, prod: r.prod.Load(), cachedCons: r.cons.Load()}
}

// free returns the number of free slots, at least want if that many are
// free: it loads cons only when the cached copy shows fewer than want.
func (p *producer) free(want uint32) uint32 {
	size := p.mask + 1
	n := size - (p.prod - p.cachedCons)
	if n < want {
		p.cachedCons = p.r.cons.Load()
		n = size - (p.prod - p.cachedCons)
	}
	return n
}

// put fills the next slot. The caller has checked free.
func (p *producer) put(d desc) {
	p.desc[p.prod&p.mask] = d
	p.prod++
}

// publish makes every slot put so far visible to the consumer: one atomic
// store per burst.
func (p *producer) publish() { p.r.prod.Store(p.prod) }

// consumer is the consumer's view of a ring, with a cached copy of prod.
// Owned by one goroutine.
type consumer struct {
	r          *ring
	desc       []desc
	mask       uint32
	cons       uint32 // next slot to read; published by release
	cachedProd uint32
}

func newConsumer(r *ring) consumer {
	return consumer{r: r, desc: r.desc, mask: r.mask, cons: r.cons.Load(), cachedProd: r.prod.Load()}
}

// avail returns the number of filled slots, at least want if that many are
// filled: it loads prod only when the cached copy shows fewer than want.
func (c *consumer) avail(want uint32) uint32 {
	n := c.cachedProd - c.cons
	if n < want {
		c.cachedProd = c.r.prod.Load()
		n = c.cachedProd - c.cons
	}
	return n
}

// get reads the next slot. The caller has checked avail.
func (c *consumer) get() desc {
	d := c.desc[c.cons&c.mask]
	c.cons++
	return d
}

// release gives the slots read so far back to the producer: one atomic
// store per burst.
func (c *consumer) release() { c.r.cons.Store(c.cons) }

// pending reports whether the producer has published slots the consumer has
// not read, loading prod.
func (c *consumer) pending() bool { return c.r.prod.Load() != c.cons }
