package memport

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
)

// txHalf is the transmit half of a queue: the producer ends of the rings to
// every RX queue of the peer, a cache of the port's own pool (Alloc, Free,
// originals after a copy) and a cache of the peer's pool to copy into (the
// same cache when the pool is shared). Owned by one goroutine; corrupt and
// the counters are shared.
type txHalf struct {
	q         *Queue
	out       []producer // out[k]: the ring to the peer's RX queue k
	own       *dataplane.Cache
	peerCache *dataplane.Cache
	corrupt   atomic.Pointer[desc] // test hook, see Port.CorruptNextDescriptor
	_         [cacheLine]byte

	stats counters
	_     [cacheLine]byte
}

var _ dataplane.TX = (*txHalf)(nil)

// Transmit puts frames on the rings to the peer's RX queues, each frame on
// the ring of the queue RSSQueue picks, and returns how many it took. It
// takes ownership of frames[:n]; the caller keeps frames[n:], which begin
// with a frame whose ring is full (counted once in RingFull). Of the frames
// taken, those too long for the MTU are dropped (DropTooLong), those of a
// pool other than the peer's are copied into a buffer of the peer's pool
// (Copies; DropNoBuffer if the peer's pool is empty) and the originals
// freed, and the rest cross without a copy. A frame whose data starts less
// than dataplane.MinHeadroom into its buffer is moved to the pool's default
// headroom first. If the peer is closed every frame is taken and dropped
// (DropClosed). After Close of this port Transmit returns 0.
//
// One atomic store per ring touched publishes the burst; the peer's
// wait fd is signalled only if its owner armed it (see RX.Arm).
func (tx *txHalf) Transmit(frames []dataplane.Frame) int {
	p := tx.q.port
	if p.closed.Load() {
		return 0
	}
	peer := p.peer
	if peer.closed.Load() {
		tx.own.FreeFrames(frames)
		add(&tx.stats.drops[dataplane.DropClosed], uint64(len(frames)))
		return len(frames)
	}
	peerPool := peer.pool
	corrupt := tx.corrupt.Load()
	nq := len(tx.out)
	var touched uint64 // bit k: pushed on out[k]
	var pkts, bytes, copies, tooLong, noBuf, bad uint64
	i := 0
	if corrupt == nil {
		// The common burst first: frames of the peer's pool that need
		// nothing done, onto the one ring or the rings RSS picks.
		if nq == 1 {
			i, bytes = tx.out[0].putPlain(frames, peerPool, p.maxLen)
			if i > 0 {
				touched = 1
			}
		} else {
			i, bytes, touched = tx.putPlainRSS(frames, peerPool, p.maxLen)
		}
		pkts = uint64(i)
		// Then frames of our own pool bound for a peer with its own
		// pool (separate memory, as two hosts' NICs): each copied into
		// a buffer of the peer's pool, the originals freed in one call.
		if own := tx.own.Pool(); i < len(frames) && peerPool != own {
			k, kb, kt := tx.putCopy(frames[i:], own, p.maxLen)
			if k > 0 {
				tx.own.FreeFrames(frames[i : i+k])
				i += k
				pkts += uint64(k)
				copies += uint64(k)
				bytes += kb
				touched |= kt
			}
		}
	}
	// With one peer queue, the ring's room is checked once for the burst.
	room := uint32(0)
	if nq == 1 {
		room = tx.out[0].free(uint32(len(frames) - i))
	}
	// Originals of copied frames are freed a run at a time: frames
	// [copied, i) were all copied (copied < 0: no run is open).
	copied := -1
	for ; i < len(frames); i++ {
		f := &frames[i]
		if f.IsZero() {
			bad++
			continue
		}
		l := uint32(f.Len())
		if l > p.maxLen && !taggedFits(f.Data(), p.maxLen) {
			tooLong++
			if copied >= 0 {
				tx.own.FreeFrames(frames[copied:i])
				copied = -1
			}
			tx.own.FreeFrames(frames[i : i+1])
			continue
		}
		k := 0
		if nq > 1 {
			k = RSSQueue(f.Data(), nq)
			if tx.out[k].free(1) == 0 {
				break
			}
		} else if room == 0 {
			break
		} else {
			room--
		}
		out := &tx.out[k]
		var d desc
		if f.Pool() == peerPool {
			if copied >= 0 {
				tx.own.FreeFrames(frames[copied:i])
				copied = -1
			}
			if f.Headroom() < dataplane.MinHeadroom ||
				f.Headroom()+int(p.maxLen)+vlanTagLen+dataplane.MinTailroom > peerPool.FrameSize() {
				moveToHeadroom(f)
			}
			d = desc{addr: f.Addr(), len: l}
		} else {
			if copied < 0 {
				copied = i
			}
			nf, ok := tx.peerCache.AllocFrame()
			if !ok {
				noBuf++
				continue
			}
			dataplane.CopyInto(&nf, f) // fits: l <= MTU + 18 and the pool was sized for it
			copies++
			d = desc{addr: nf.Addr(), len: l}
		}
		if corrupt != nil && tx.corrupt.CompareAndSwap(corrupt, nil) {
			d = tx.corruptDesc(d, *corrupt)
			corrupt = nil
		}
		out.put(d)
		touched |= 1 << k
		pkts++
		bytes += uint64(l)
	}
	if copied >= 0 {
		tx.own.FreeFrames(frames[copied:i])
	}
	for k := 0; touched != 0; k, touched = k+1, touched>>1 {
		if touched&1 != 0 {
			tx.out[k].publish()
			peer.queues[k].rx.wake()
		}
	}
	if pkts > 0 {
		add(&tx.stats.packets, pkts)
		add(&tx.stats.bytes, bytes)
	}
	if copies > 0 {
		add(&tx.stats.copies, copies)
		peerPool.CountCopy(int(copies))
	}
	if tooLong|noBuf|bad != 0 {
		add(&tx.stats.drops[dataplane.DropTooLong], tooLong)
		add(&tx.stats.drops[dataplane.DropNoBuffer], noBuf)
		add(&tx.stats.drops[dataplane.DropBadDescriptor], bad)
	}
	if i < len(frames) {
		add(&tx.stats.ringFull, 1)
	}
	return i
}

// putPlain puts the leading frames of frames that cross without any work
// (of pool, at most maxLen bytes, headroom within what the receiver
// accepts) onto the ring while it has room, and returns how many it put and
// their bytes. It keeps the ring's index in a register for the burst: the
// per-frame cost of the common case is a few loads and one descriptor
// store.
func (o *producer) putPlain(frames []dataplane.Frame, pool *dataplane.Pool, maxLen uint32) (n int, bytes uint64) {
	room := o.free(uint32(len(frames)))
	frames = frames[:min(len(frames), int(room))]
	ring, mask, prod := o.desc, o.mask, o.prod
	maxHead := maxHeadroom(pool, maxLen)
	for i := range frames {
		f := &frames[i]
		l, ok := plainFrame(f, pool, maxLen, maxHead)
		if !ok {
			break
		}
		ring[prod&mask] = desc{addr: f.Addr(), len: uint32(l)}
		prod++
		bytes += uint64(l)
		n++
	}
	o.prod = prod
	return n, bytes
}

// putPlainRSS is putPlain for several peer queues: each frame goes to the
// ring RSSQueue picks, while that ring has room. It returns the frames put,
// their bytes and the rings touched (bit k: out[k]).
func (tx *txHalf) putPlainRSS(frames []dataplane.Frame, pool *dataplane.Pool, maxLen uint32) (n int, bytes, touched uint64) {
	out := tx.out
	maxHead := maxHeadroom(pool, maxLen)
	// room[k] is what is known free on out[k], loaded (one check of the
	// cached consumer index) when the burst first uses the ring and
	// again only when it runs out.
	var room [maxQueues]uint32
	for i := range frames {
		f := &frames[i]
		l, ok := plainFrame(f, pool, maxLen, maxHead)
		if !ok {
			break
		}
		k := RSSQueue(f.Data(), len(out))
		o := &out[k]
		if room[k] == 0 {
			if room[k] = o.free(uint32(len(frames) - i)); room[k] == 0 {
				break
			}
		}
		room[k]--
		o.put(desc{addr: f.Addr(), len: uint32(l)})
		touched |= 1 << k
		bytes += uint64(l)
		n++
	}
	return n, bytes, touched
}

// putCopy copies the leading frames of frames that are of pool own and at
// most maxLen bytes into buffers of the peer's pool and puts those on the
// rings RSSQueue picks, while the rings have room and the peer's pool has
// buffers. It returns how many it put, their bytes and the rings touched;
// the caller frees the originals. The room of each ring is kept in a local
// as in putPlainRSS.
func (tx *txHalf) putCopy(frames []dataplane.Frame, own *dataplane.Pool, maxLen uint32) (n int, bytes, touched uint64) {
	out, pc := tx.out, tx.peerCache
	var room [maxQueues]uint32
	for i := range frames {
		f := &frames[i]
		l := uint32(f.Len())
		if f.Pool() != own || l > maxLen {
			break
		}
		k := 0
		if len(out) > 1 {
			k = RSSQueue(f.Data(), len(out))
		}
		o := &out[k]
		if room[k] == 0 {
			if room[k] = o.free(uint32(len(frames) - i)); room[k] == 0 {
				break
			}
		}
		nf, ok := pc.AllocFrame()
		if !ok {
			break // the general loop counts it
		}
		dataplane.CopyInto(&nf, f) // fits: l <= MTU + 18 and the pool was sized for it
		room[k]--
		o.put(desc{addr: nf.Addr(), len: l})
		touched |= 1 << k
		bytes += uint64(l)
		n++
	}
	return n, bytes, touched
}

// maxHeadroom is the most headroom a frame of pool may have for the
// receiver to find room behind a frame of maxLen bytes (and a VLAN tag).
func maxHeadroom(pool *dataplane.Pool, maxLen uint32) int {
	return pool.FrameSize() - int(maxLen) - vlanTagLen - dataplane.MinTailroom
}

// plainFrame returns f's length and whether it crosses without any work:
// of pool, at most maxLen bytes, headroom from dataplane.MinHeadroom to
// maxHead.
func plainFrame(f *dataplane.Frame, pool *dataplane.Pool, maxLen uint32, maxHead int) (int, bool) {
	l, h := f.Len(), f.Headroom()
	return l, f.Pool() == pool && uint32(l) <= maxLen && h >= dataplane.MinHeadroom && h <= maxHead
}

// moveToHeadroom moves f's data to its pool's default headroom, in place
// (copy handles the overlap).
func moveToHeadroom(f *dataplane.Frame) {
	src := f.Data()
	f.Reset(f.Pool().Headroom())
	f.SetLen(len(src))
	copy(f.Data(), src)
}

// corruptDesc applies the test hook: it returns c in place of d, freeing
// d's buffer if the receiver will not (c is invalid).
func (tx *txHalf) corruptDesc(d, c desc) desc {
	if c.addr == SameAddr {
		c.addr = d.addr
	}
	pool := tx.peerCache.Pool()
	if c.addr != d.addr || !descOK(pool, c) {
		tx.peerCache.Put(d.addr &^ uint64(pool.FrameSize()-1))
	}
	return c
}

// Alloc fills frames[0:n] with empty frames of the port's pool, with the
// pool's headroom and length 0, and returns n (short when the pool is). The
// caller owns them. After Close it returns 0.
func (tx *txHalf) Alloc(frames []dataplane.Frame) int {
	if tx.q.port.closed.Load() {
		return 0
	}
	return tx.own.AllocFrames(frames)
}

// Free returns frames to their pools. The caller no longer owns them. It
// does not allocate.
func (tx *txHalf) Free(frames []dataplane.Frame) { tx.own.FreeFrames(frames) }

// Reclaim returns 0: a memport ring hands frames straight to the peer, so
// there is no completion ring.
func (tx *txHalf) Reclaim() int { return 0 }
