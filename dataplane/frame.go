package dataplane

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Frame names one packet buffer of a Pool: a chunk of FrameSize bytes whose
// packet data starts Headroom bytes in and is Len bytes long.
//
// A Frame is a small value (no pointers into the packet); copying the value
// does not copy the packet, and two copies name the same buffer. Exactly one
// owner may use a buffer at a time: the doc of each call that takes or
// returns frames says who owns them afterwards. A buffer is given back
// once (Free, Transmit, FreeFrames): see Cache.FreeFrames for a frame
// freed twice, and the build tag that catches it. The zero Frame names nothing
// (IsZero): freeing it (Cache.FreeFrames) does nothing, and its other
// methods (Data, SetLen, Reset, ...) panic on it, as on a nil pointer (no
// check on the per-packet path).
type Frame struct {
	pool  *Pool
	chunk uint64 // offset of the chunk in the pool's memory
	off   uint32 // offset of the first data byte from chunk
	len   uint32 // data length in bytes
}

// Data returns the packet bytes. Its capacity reaches the end of the chunk,
// so appending up to Tailroom bytes writes in place. The slice is valid while
// the caller owns the frame.
func (f *Frame) Data() []byte {
	start := f.chunk + uint64(f.off)
	return f.pool.mem[start : start+uint64(f.len) : f.chunk+uint64(f.pool.frameSize)]
}

// Warm loads the cache line of each frame's first data byte and the next (the headers
// and what follows them) and returns a value for the caller to keep (in a
// field of its own) so that the loads are not optimised away. A receiver
// calls it on a burst before handling the frames one by one: frames written
// on another CPU then miss the cache all at once, the misses overlapping,
// instead of one after the other as each frame is handled (frames come off
// free lists in no order a hardware prefetcher follows).
func Warm(frames []Frame) (x byte) {
	for i := range frames {
		f := &frames[i]
		if f.len == 0 {
			continue
		}
		m := f.pool.mem
		a := f.chunk + uint64(f.off)
		x ^= m[a]
		if f.len > cacheLine {
			x ^= m[a+cacheLine]
		}
	}
	return x
}

// Prefix returns the first n bytes of the data (f.Data()[:n], capacity
// n), or nil when the data is shorter than n: for a caller that reads a
// header at a fixed place (a look-ahead over a burst), one bounds check
// where Data and a slice of it take two or three.
func (f *Frame) Prefix(n int) []byte {
	if uint64(n) > uint64(f.len) {
		return nil
	}
	start := f.chunk + uint64(f.off)
	return f.pool.mem[start : start+uint64(n) : start+uint64(n)]
}

// Len is the packet length in bytes.
func (f *Frame) Len() int { return int(f.len) }

// Headroom is the number of bytes free in front of the data.
func (f *Frame) Headroom() int { return int(f.off) }

// Tailroom is the number of bytes free behind the data.
func (f *Frame) Tailroom() int { return int(f.pool.frameSize - f.off - f.len) }

// Pool is the frame's pool, nil for the zero Frame.
func (f *Frame) Pool() *Pool { return f.pool }

// Chunk is the offset of the frame's chunk in its pool's memory (the UMEM
// address of the chunk on AF_XDP).
func (f *Frame) Chunk() uint64 { return f.chunk }

// Addr is the offset of the first data byte in the pool's memory (the UMEM
// address of a descriptor on AF_XDP).
func (f *Frame) Addr() uint64 { return f.chunk + uint64(f.off) }

// IsZero reports whether f names no buffer.
func (f *Frame) IsZero() bool { return f.pool == nil }

// Prepend grows the data by n bytes at the front and returns the whole data,
// whose first n bytes are for the caller to fill. It returns nil and changes
// nothing if n exceeds Headroom.
func (f *Frame) Prepend(n int) []byte {
	if n < 0 || uint64(n) > uint64(f.off) {
		return nil
	}
	f.off -= uint32(n)
	f.len += uint32(n)
	return f.Data()
}

// Grow is Prepend for a caller that already holds the bytes in front of
// the data (a slice of the frame's data from before a TrimFront): it
// grows the data by n bytes at the front and returns true, or returns
// false and changes nothing if n exceeds Headroom.
func (f *Frame) Grow(n int) bool {
	if n < 0 || uint64(n) > uint64(f.off) {
		return false
	}
	f.off -= uint32(n)
	f.len += uint32(n)
	return true
}

// TrimFront drops n bytes from the front of the data (they become headroom).
// It returns false and changes nothing if n exceeds Len.
func (f *Frame) TrimFront(n int) bool {
	if n < 0 || uint64(n) > uint64(f.len) {
		return false
	}
	f.off += uint32(n)
	f.len -= uint32(n)
	return true
}

// SetLen sets the data length to n bytes, growing into the tailroom or
// shrinking. It returns false and changes nothing if n < 0 or the data would
// pass the end of the chunk.
func (f *Frame) SetLen(n int) bool {
	if n < 0 || uint64(f.off)+uint64(n) > uint64(f.pool.frameSize) {
		return false
	}
	f.len = uint32(n)
	return true
}

// Reset empties the frame and puts its data start headroom bytes into the
// chunk. It returns false and changes nothing if headroom is past the chunk.
func (f *Frame) Reset(headroom int) bool {
	if headroom < 0 || uint64(headroom) > uint64(f.pool.frameSize) {
		return false
	}
	f.off = uint32(headroom)
	f.len = 0
	return true
}

// cacheLine is the size in bytes of a CPU cache line (amd64, arm64).
const cacheLine = 64

// Pool is a region of memory cut into chunks of FrameSize bytes (the UMEM on
// AF_XDP), with a shared list of free chunks.
//
// The free list is guarded by a mutex taken once per burst by Get and Put;
// the owners of queue halves keep private caches (see Cache) in front of it.
// Every other method is safe for concurrent use and takes no lock.
type Pool struct {
	// Read on every frame access by every queue's goroutine: kept on a
	// cache line of their own, apart from the free list's lock and the
	// counter, which spills and refills write.
	mem       []byte
	frameSize uint32
	headroom  uint32
	nframes   uint32
	_         [cacheLine - 36]byte

	mu   sync.Mutex
	free []uint64 // chunk offsets; guarded by mu

	copies atomic.Uint64

	track *frameTrack // nil unless built with wgpio_framecheck
}

// MinDataRoom is the least number of bytes a frame buffer has behind the
// default headroom: a 1500-byte MTU packet with an Ethernet header and an
// 802.1Q tag (1518 bytes), plus MinTailroom.
const MinDataRoom = 1518 + MinTailroom

// NewPool returns a pool over mem, cut into len(mem)/frameSize chunks, with
// every chunk on the free list. frameSize must be a power of 2 of at least
// 2048 bytes; headroom is the data offset of received and allocated frames,
// at least MinHeadroom and at most frameSize - MinDataRoom (466 for 2048-byte
// frames). The pool does not own mem: the caller (a backend) frees it after
// the pool is no longer used.
func NewPool(mem []byte, frameSize, headroom int) (*Pool, error) {
	switch {
	case frameSize < 2048 || frameSize&(frameSize-1) != 0:
		return nil, fmt.Errorf("dataplane: frame size %d is not a power of 2 >= 2048", frameSize)
	case headroom < MinHeadroom || headroom > frameSize-MinDataRoom:
		return nil, fmt.Errorf("dataplane: headroom %d not in [%d, frame size %d - %d]", headroom, MinHeadroom, frameSize, MinDataRoom)
	case len(mem) < frameSize:
		return nil, fmt.Errorf("dataplane: pool memory of %d bytes holds no %d-byte frame", len(mem), frameSize)
	}
	n := len(mem) / frameSize
	p := &Pool{
		mem:       mem,
		frameSize: uint32(frameSize),
		headroom:  uint32(headroom),
		nframes:   uint32(n),
		free:      make([]uint64, n),
		track:     newFrameTrack(n, frameSize),
	}
	for i := range p.free {
		// Hand out low addresses first.
		p.free[i] = uint64(n-1-i) * uint64(frameSize)
	}
	return p, nil
}

// Mem is the pool's whole memory.
func (p *Pool) Mem() []byte { return p.mem }

// FrameSize is the chunk size in bytes.
func (p *Pool) FrameSize() int { return int(p.frameSize) }

// Headroom is the default data offset of a frame in its chunk.
func (p *Pool) Headroom() int { return int(p.headroom) }

// NumFrames is the number of chunks.
func (p *Pool) NumFrames() int { return int(p.nframes) }

// Copies counts frames copied into this pool from another on transmit.
func (p *Pool) Copies() uint64 { return p.copies.Load() }

// CountCopy adds n to Copies (for backends).
func (p *Pool) CountCopy(n int) { p.copies.Add(uint64(n)) }

// FreeCount is the length of the shared free list (excluding caches).
func (p *Pool) FreeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Get moves up to len(dst) free chunk offsets into dst and returns how many.
// The caller owns the chunks.
func (p *Pool) Get(dst []uint64) int {
	n := p.get(dst)
	if frameCheck {
		for _, c := range dst[:n] {
			p.track.take(c)
		}
	}
	return n
}

// get is Get for a Cache's refill: the chunks stay free, in the cache.
func (p *Pool) get(dst []uint64) int {
	p.mu.Lock()
	n := copy(dst, p.free[max(0, len(p.free)-len(dst)):])
	p.free = p.free[:len(p.free)-n]
	p.mu.Unlock()
	return n
}

// Put returns chunk offsets to the free list. Each must have come from Get
// (or the backend's rings) and be its caller's: a chunk given back twice
// is handed out twice (see framecheck.go). Put does not keep src.
func (p *Pool) Put(src []uint64) {
	if frameCheck {
		for _, c := range src {
			p.track.give(c)
		}
	}
	p.put(src)
}

// put is Put for a Cache's spill and Drain: the chunks were free, in the
// cache.
func (p *Pool) put(src []uint64) {
	p.mu.Lock()
	p.free = append(p.free, src...)
	p.mu.Unlock()
}

// PutOne returns one chunk offset to the free list, as Put.
func (p *Pool) PutOne(chunk uint64) {
	if frameCheck {
		p.track.give(chunk)
	}
	p.mu.Lock()
	p.free = append(p.free, chunk)
	p.mu.Unlock()
}

// AppendFree appends the chunk offsets on the shared free list to dst and
// returns it, for accounting (see Accounter).
func (p *Pool) AppendFree(dst []uint64) []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(dst, p.free...)
}

// Valid reports whether [addr, addr+n) lies inside one chunk of the pool.
// Backends check every descriptor a ring hands them with it.
func (p *Pool) Valid(addr uint64, n uint32) bool {
	if addr >= uint64(len(p.mem)) {
		return false
	}
	chunkEnd := (addr &^ uint64(p.frameSize-1)) + uint64(p.frameSize)
	return addr+uint64(n) <= chunkEnd && chunkEnd <= uint64(p.nframes)*uint64(p.frameSize)
}

// Frame returns the frame whose data is [addr, addr+n) in the pool's memory;
// the chunk is addr rounded down to FrameSize. The caller must have checked
// Valid(addr, n).
func (p *Pool) Frame(addr uint64, n uint32) Frame {
	chunk := addr &^ uint64(p.frameSize-1)
	return Frame{pool: p, chunk: chunk, off: uint32(addr - chunk), len: n}
}

// CopyInto copies src's data into dst (a frame of any pool), replacing dst's
// data and placing it at dst's pool's default headroom. It returns false if
// the data does not fit.
func CopyInto(dst *Frame, src *Frame) bool {
	if !dst.Reset(int(dst.pool.headroom)) || !dst.SetLen(src.Len()) {
		return false
	}
	copy(dst.Data(), src.Data())
	return true
}

// Cache is an owner-private stack of free chunks in front of a Pool's shared
// free list, refilled and drained in bursts of CacheBatch so that the pool's
// lock is taken at most once per burst. A Cache has one owner goroutine; its
// zero value is not usable (use NewCache).
type Cache struct {
	pool  *Pool
	addrs []uint64 // cap 4*CacheBatch

	// foreign batches chunks of other pools in FreeFrames, so that a run of
	// frames of one foreign pool takes that pool's lock once, without
	// allocating.
	foreign [foreignBatch]uint64
}

// CacheBatch is the number of chunks a Cache moves to or from its pool at
// once. A Cache holds at most 4*CacheBatch chunks; when it fills up it gives
// all but 2*CacheBatch back, and FreeFrames trims it to 2*CacheBatch once it
// holds more than 3*CacheBatch.
//
// It is one burst (64 frames): the pool's lock once per burst at most, and
// few buffers in circulation. Where frames flow one way (one side's Cache
// only frees, the other's only allocates, as between a receive queue and
// the port that copies into its pool), a buffer comes round again after
// about 2*CacheBatch frames: at 256 some 1,000 buffers per pool, whose
// lines a gateway's state for thousands of peers evicts from the caches
// between two uses (bench/scale's 100,000-peer rate: 0.25 s of a 6 s
// profile more in the WAN port's copy than the one-peer gateway's, 0.07 s
// at 64). The rates moved within a shared VM's noise (docs/performance.md,
// 6 December); 32 was no better (a refill per half burst).
const CacheBatch = 64

const foreignBatch = 64

// NewCache returns an empty cache in front of p.
func NewCache(p *Pool) *Cache {
	return &Cache{pool: p, addrs: make([]uint64, 0, 4*CacheBatch)}
}

// Pool is the pool the cache stands in front of.
func (c *Cache) Pool() *Pool { return c.pool }

// Len is the number of chunks in the cache.
func (c *Cache) Len() int { return len(c.addrs) }

// Get takes one free chunk, refilling from the pool if needed. ok is false
// when the pool is empty too. The caller owns the chunk.
func (c *Cache) Get() (chunk uint64, ok bool) {
	if len(c.addrs) == 0 && !c.refill() {
		return 0, false
	}
	chunk = c.addrs[len(c.addrs)-1]
	c.addrs = c.addrs[:len(c.addrs)-1]
	if frameCheck {
		c.pool.track.take(chunk)
	}
	return chunk, true
}

// refill takes up to CacheBatch chunks from the pool; it is called only on
// an empty cache.
func (c *Cache) refill() bool {
	n := c.pool.get(c.addrs[len(c.addrs):cap(c.addrs)][:CacheBatch])
	c.addrs = c.addrs[:len(c.addrs)+n]
	return n > 0
}

// Put gives one chunk of this cache's pool back. The caller must own it: a
// chunk given back twice is handed out twice (see framecheck.go).
func (c *Cache) Put(chunk uint64) {
	if frameCheck {
		c.pool.track.give(chunk)
	}
	if len(c.addrs) == cap(c.addrs) {
		c.spill()
	}
	c.addrs = append(c.addrs, chunk)
}

// spill gives every chunk above 2*CacheBatch back to the pool.
func (c *Cache) spill() {
	keep := 2 * CacheBatch
	if len(c.addrs) <= keep {
		return
	}
	c.pool.put(c.addrs[keep:])
	c.addrs = c.addrs[:keep]
}

// FreeFrames returns frames to their pools: frames of this cache's pool go
// into the cache, others to their own pool's free list (one lock per run of
// up to 64 frames of the same foreign pool). Zero frames are skipped. The
// caller no longer owns the frames. It does not allocate.
//
// Each frame must be the caller's, freed once: a frame freed twice (or
// freed after Transmit took it, or freed through two copies of its Frame
// value) has its buffer handed out to two later allocations, one packet's
// bytes written over another's. Nothing checks it per frame; a build with
// the tag wgpio_framecheck panics at the second free (framecheck.go).
func (c *Cache) FreeFrames(frames []Frame) {
	var fpool *Pool
	nf := 0
	for i := range frames {
		f := &frames[i]
		switch {
		case f.pool == c.pool:
			c.Put(f.chunk)
			continue
		case f.pool == nil:
			continue
		}
		if f.pool != fpool || nf == len(c.foreign) {
			if nf > 0 {
				fpool.Put(c.foreign[:nf])
			}
			fpool, nf = f.pool, 0
		}
		c.foreign[nf] = f.chunk
		nf++
	}
	if nf > 0 {
		fpool.Put(c.foreign[:nf])
	}
	if len(c.addrs) > 3*CacheBatch {
		c.spill()
	}
}

// Drain gives every cached chunk back to the pool.
func (c *Cache) Drain() {
	c.pool.put(c.addrs)
	c.addrs = c.addrs[:0]
}

// AppendChunks appends the cached chunk offsets to dst and returns it, for
// accounting (see Accounter). Only the owner may call it.
func (c *Cache) AppendChunks(dst []uint64) []uint64 {
	return append(dst, c.addrs...)
}

// AllocFrames fills frames with empty frames of the pool, with its default
// headroom, and returns how many it filled (short only when the pool ran
// out). The caller owns them. One refill of the cache per CacheBatch
// frames; no call per frame.
func (c *Cache) AllocFrames(frames []Frame) int {
	n := 0
	for n < len(frames) {
		if len(c.addrs) == 0 && !c.refill() {
			break
		}
		k := min(len(frames)-n, len(c.addrs))
		top := len(c.addrs) - 1
		p, head := c.pool, c.pool.headroom
		for i := range frames[n : n+k] {
			frames[n+i] = Frame{pool: p, chunk: c.addrs[top-i], off: head}
			if frameCheck {
				p.track.take(c.addrs[top-i])
			}
		}
		c.addrs = c.addrs[:len(c.addrs)-k]
		n += k
	}
	return n
}

// AllocFrame takes a free chunk and returns it as an empty frame with the
// pool's default headroom.
func (c *Cache) AllocFrame() (Frame, bool) {
	chunk, ok := c.Get()
	if !ok {
		return Frame{}, false
	}
	return Frame{pool: c.pool, chunk: chunk, off: c.pool.headroom}, true
}
