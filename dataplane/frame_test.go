package dataplane

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
)

const (
	testFrameSize = 2048
	testHeadroom  = 256
)

func newTestPool(t testing.TB, frames int) *Pool {
	t.Helper()
	p, err := NewPool(make([]byte, frames*testFrameSize), testFrameSize, testHeadroom)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	return p
}

func TestNewPoolRejects(t *testing.T) {
	tests := []struct {
		name                     string
		mem, frameSize, headroom int
	}{
		{"frame size not power of 2", 8192, 3000, 256},
		{"frame size too small", 8192, 1024, 128},
		{"headroom below minimum", 8192, 2048, MinHeadroom - 1},
		{"headroom leaves too little room", 8192, 2048, 2048 - MinDataRoom + 1},
		{"memory smaller than a frame", 2047, 2048, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPool(make([]byte, tt.mem), tt.frameSize, tt.headroom); err == nil {
				t.Errorf("NewPool(%d, %d, %d) = nil error, want an error", tt.mem, tt.frameSize, tt.headroom)
			}
		})
	}
}

func TestPoolShape(t *testing.T) {
	// 3.5 frames of memory: the half frame at the end is not a chunk.
	p, err := NewPool(make([]byte, 3*testFrameSize+testFrameSize/2), testFrameSize, testHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.NumFrames(); got != 3 {
		t.Errorf("NumFrames() = %d, want 3", got)
	}
	if got := p.FreeCount(); got != 3 {
		t.Errorf("FreeCount() = %d, want 3", got)
	}
	dst := make([]uint64, 4)
	n := p.Get(dst)
	// Low addresses first.
	if want := []uint64{2 * testFrameSize, testFrameSize, 0}; !slices.Equal(dst[:n], want) && !slices.Equal(slices.Sorted(slices.Values(dst[:n])), []uint64{0, testFrameSize, 2 * testFrameSize}) {
		t.Errorf("Get = %v, want the 3 chunks", dst[:n])
	}
	if got := p.Get(dst); got != 0 {
		t.Errorf("Get on an empty pool = %d, want 0", got)
	}
	p.Put(dst[:n])
	if got := p.AppendFree(nil); len(got) != 3 {
		t.Errorf("AppendFree = %v, want 3 chunks", got)
	}
}

func TestPoolValid(t *testing.T) {
	// 2 frames and a tail of 100 bytes that belongs to no chunk.
	p, err := NewPool(make([]byte, 2*testFrameSize+100), testFrameSize, testHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	const fs = testFrameSize
	tests := []struct {
		addr uint64
		n    uint32
		want bool
	}{
		{0, 0, true},
		{0, fs, true},
		{0, fs + 1, false},            // crosses into chunk 1
		{fs - 1, 1, true},             // last byte of chunk 0
		{fs - 1, 2, false},            // crosses the chunk boundary
		{fs, fs, true},                // the whole last chunk
		{2*fs - 1, 1, true},           // last byte of the last chunk
		{2 * fs, 0, false},            // the tail is no chunk
		{2*fs + 10, 1, false},         // inside the tail
		{2*fs + 100, 0, false},        // end of memory
		{1 << 40, 0, false},           // far out
		{^uint64(0), 1, false},        // wraps
		{^uint64(0) - 10, 100, false}, // wraps
		{fs + 256, 1514, true},
		{fs + 256, 0xffffffff, false},
	}
	for _, tt := range tests {
		if got := p.Valid(tt.addr, tt.n); got != tt.want {
			t.Errorf("Valid(%#x, %d) = %v, want %v", tt.addr, tt.n, got, tt.want)
		}
	}
}

func TestFrameRoom(t *testing.T) {
	p := newTestPool(t, 2)
	c := NewCache(p)
	f, ok := c.AllocFrame()
	if !ok {
		t.Fatal("AllocFrame = false, want a frame")
	}
	if got := f.Headroom(); got != testHeadroom {
		t.Errorf("Headroom() = %d, want %d", got, testHeadroom)
	}
	if got := f.Tailroom(); got != testFrameSize-testHeadroom {
		t.Errorf("Tailroom() = %d, want %d", got, testFrameSize-testHeadroom)
	}
	if got := f.Addr(); got != f.Chunk()+testHeadroom {
		t.Errorf("Addr() = %d, want Chunk()+%d = %d", got, testHeadroom, f.Chunk()+testHeadroom)
	}
	if f.Pool() != p || f.IsZero() {
		t.Errorf("Pool() = %p, IsZero() = %v; want %p, false", f.Pool(), f.IsZero(), p)
	}
	if !f.SetLen(100) {
		t.Fatal("SetLen(100) = false")
	}
	copy(f.Data(), bytes.Repeat([]byte{0xab}, 100))
	if got := cap(f.Data()); got != testFrameSize-testHeadroom {
		t.Errorf("cap(Data()) = %d, want %d (to the end of the chunk)", got, testFrameSize-testHeadroom)
	}
	// Prefix: the data's first n bytes, capacity n; nil past the data
	// (a negative n included).
	for _, n := range []int{0, 1, 34, 100} {
		d := f.Prefix(n)
		if len(d) != n || cap(d) != n || (n > 0 && &d[0] != &f.Data()[0]) {
			t.Errorf("Prefix(%d): len %d cap %d, want the data's first %d bytes", n, len(d), cap(d), n)
		}
	}
	for _, n := range []int{101, testFrameSize, -1} {
		if d := f.Prefix(n); d != nil {
			t.Errorf("Prefix(%d) of 100 bytes = %d bytes, want nil", n, len(d))
		}
	}

	// Prepend within the headroom.
	d := f.Prepend(42)
	if len(d) != 142 || f.Headroom() != testHeadroom-42 || f.Len() != 142 {
		t.Errorf("after Prepend(42): len(data) = %d, Headroom() = %d, Len() = %d; want 142, %d, 142", len(d), f.Headroom(), f.Len(), testHeadroom-42)
	}
	if d[42] != 0xab {
		t.Errorf("Prepend(42) moved the data: data[42] = %#x, want 0xab", d[42])
	}
	// Prepend past the headroom fails and changes nothing.
	before := f
	if d := f.Prepend(f.Headroom() + 1); d != nil || f != before {
		t.Errorf("Prepend(Headroom()+1) = %d bytes, frame %+v; want nil, unchanged %+v", len(d), f, before)
	}
	if d := f.Prepend(-1); d != nil || f != before {
		t.Errorf("Prepend(-1) = %d bytes; want nil, unchanged", len(d))
	}
	// Prepend the whole headroom.
	if d := f.Prepend(f.Headroom()); d == nil || f.Headroom() != 0 {
		t.Errorf("Prepend(Headroom()) = nil or Headroom() = %d, want 0", f.Headroom())
	}

	// Grow is Prepend without the data: the same frame after.
	f = before
	g := before
	if !g.Grow(42) || g != (func() Frame { h := before; h.Prepend(42); return h })() {
		t.Errorf("Grow(42): frame %+v, want what Prepend(42) makes", g)
	}
	if g := before; g.Grow(g.Headroom()+1) || g.Grow(-1) || g != before {
		t.Errorf("Grow past the headroom or by -1 = true or changed the frame")
	}
	if g := before; !g.Grow(g.Headroom()) || g.Headroom() != 0 || g.Len() != before.Len()+before.Headroom() {
		t.Errorf("Grow(Headroom()): Headroom() = %d, Len() = %d", g.Headroom(), g.Len())
	}

	// TrimFront.
	if !f.TrimFront(42) || f.Len() != 100 || f.Headroom() != testHeadroom {
		t.Errorf("TrimFront(42): Len() = %d, Headroom() = %d; want 100, %d", f.Len(), f.Headroom(), testHeadroom)
	}
	before = f
	if f.TrimFront(101) || f != before {
		t.Errorf("TrimFront(101) on 100 bytes = true or changed the frame")
	}
	if f.TrimFront(-1) || f != before {
		t.Errorf("TrimFront(-1) = true or changed the frame")
	}
	if !f.TrimFront(100) || f.Len() != 0 {
		t.Errorf("TrimFront(Len()) failed: Len() = %d, want 0", f.Len())
	}

	// SetLen up to the end of the chunk, not past it.
	f = before
	max := testFrameSize - f.Headroom()
	if !f.SetLen(max) || f.Tailroom() != 0 {
		t.Errorf("SetLen(%d) failed or Tailroom() = %d, want 0", max, f.Tailroom())
	}
	if f.SetLen(max+1) || f.Len() != max {
		t.Errorf("SetLen(%d) past the chunk = true or changed Len() to %d", max+1, f.Len())
	}
	if f.SetLen(-1) {
		t.Errorf("SetLen(-1) = true, want false")
	}
	if !f.SetLen(0) || len(f.Data()) != 0 {
		t.Errorf("SetLen(0) failed")
	}

	// Reset.
	if !f.Reset(0) || f.Headroom() != 0 || f.Len() != 0 {
		t.Errorf("Reset(0): Headroom() = %d, Len() = %d, want 0, 0", f.Headroom(), f.Len())
	}
	if !f.Reset(testFrameSize) || f.Tailroom() != 0 {
		t.Errorf("Reset(FrameSize) failed")
	}
	if f.Reset(testFrameSize+1) || f.Reset(-1) {
		t.Errorf("Reset past the chunk = true, want false")
	}

	var zero Frame
	if !zero.IsZero() || zero.Pool() != nil {
		t.Errorf("zero Frame: IsZero() = false or Pool() != nil")
	}
}

func TestPoolFrame(t *testing.T) {
	p := newTestPool(t, 4)
	f := p.Frame(3*testFrameSize+300, 60)
	if f.Chunk() != 3*testFrameSize || f.Headroom() != 300 || f.Len() != 60 || f.Addr() != 3*testFrameSize+300 {
		t.Errorf("Frame(3*fs+300, 60) = chunk %d headroom %d len %d, want %d, 300, 60", f.Chunk(), f.Headroom(), f.Len(), 3*testFrameSize)
	}
	if &f.Data()[0] != &p.Mem()[3*testFrameSize+300] {
		t.Errorf("Frame data does not alias the pool memory")
	}
}

func TestCopyInto(t *testing.T) {
	p1 := newTestPool(t, 2)
	p2, err := NewPool(make([]byte, 2*4096), 4096, 512)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := NewCache(p1).AllocFrame()
	src.SetLen(64)
	for i := range src.Data() {
		src.Data()[i] = byte(i)
	}
	src.TrimFront(4)
	c2 := NewCache(p2)
	dst, _ := c2.AllocFrame()
	dst.Reset(0)
	if !CopyInto(&dst, &src) {
		t.Fatal("CopyInto = false, want true")
	}
	if dst.Headroom() != 512 || !bytes.Equal(dst.Data(), src.Data()) {
		t.Errorf("CopyInto: headroom %d, data %x; want 512, %x", dst.Headroom(), dst.Data(), src.Data())
	}
	big, _ := c2.AllocFrame()
	big.Reset(0)
	big.SetLen(4096)
	small := p1.Frame(testFrameSize+testHeadroom, 0)
	if CopyInto(&small, &big) {
		t.Errorf("CopyInto of 4096 bytes into a 2048-byte chunk = true, want false")
	}
}

func TestCacheRefillSpill(t *testing.T) {
	const n = 6 * CacheBatch
	p := newTestPool(t, n)
	c := NewCache(p)
	if c.Pool() != p {
		t.Fatalf("Cache.Pool() = %p, want %p", c.Pool(), p)
	}
	seen := make(map[uint64]bool)
	var got []uint64
	for i := range n {
		ch, ok := c.Get()
		if !ok {
			t.Fatalf("Get #%d = false with %d free in pool", i, p.FreeCount())
		}
		if seen[ch] {
			t.Fatalf("Get #%d returned chunk %#x twice", i, ch)
		}
		seen[ch] = true
		got = append(got, ch)
		// The cache refills by CacheBatch: the pool is touched once per batch.
		if want := n - (i/CacheBatch+1)*CacheBatch; p.FreeCount() != want {
			t.Fatalf("after Get #%d: pool FreeCount() = %d, want %d", i, p.FreeCount(), want)
		}
	}
	if _, ok := c.Get(); ok {
		t.Errorf("Get on an empty pool = true, want false")
	}
	if _, ok := c.AllocFrame(); ok {
		t.Errorf("AllocFrame on an empty pool = true, want false")
	}
	// Put until the cache is full; one more spills to 2*CacheBatch.
	for i := range 4 * CacheBatch {
		c.Put(got[i])
	}
	if c.Len() != 4*CacheBatch || p.FreeCount() != 0 {
		t.Errorf("after 4*CacheBatch Puts: Len() = %d, pool %d; want %d, 0", c.Len(), p.FreeCount(), 4*CacheBatch)
	}
	c.Put(got[4*CacheBatch])
	if c.Len() != 2*CacheBatch+1 || p.FreeCount() != 2*CacheBatch {
		t.Errorf("after a spill: Len() = %d, pool %d; want %d, %d", c.Len(), p.FreeCount(), 2*CacheBatch+1, 2*CacheBatch)
	}
	// FreeFrames trims a cache above 3*CacheBatch back to 2*CacheBatch.
	var frames []Frame
	for _, ch := range got[4*CacheBatch+1 : 5*CacheBatch+1] {
		frames = append(frames, p.Frame(ch+testHeadroom, 0))
	}
	c.FreeFrames(frames)
	if c.Len() != 2*CacheBatch || p.FreeCount() != 3*CacheBatch+1 {
		t.Errorf("after FreeFrames: Len() = %d, pool %d; want %d, %d", c.Len(), p.FreeCount(), 2*CacheBatch, 3*CacheBatch+1)
	}
	c.Drain()
	if c.Len() != 0 || p.FreeCount() != 5*CacheBatch+1 {
		t.Errorf("after Drain: Len() = %d, pool %d; want 0, %d", c.Len(), p.FreeCount(), 5*CacheBatch+1)
	}
	// Every chunk is back exactly once (the rest are still held).
	free := p.AppendFree(nil)
	slices.Sort(free)
	if len(slices.Compact(free)) != 5*CacheBatch+1 {
		t.Errorf("free list holds duplicates")
	}
}

func TestCacheFreeFramesForeign(t *testing.T) {
	own := newTestPool(t, 100)
	other1 := newTestPool(t, 200)
	other2 := newTestPool(t, 10)
	c := NewCache(own)
	c1, c2 := NewCache(other1), NewCache(other2)
	var frames []Frame
	// Mixed: runs longer than the foreign batch, alternating pools, zero frames.
	for i := range 150 {
		f, ok := c1.AllocFrame()
		if !ok {
			t.Fatal("AllocFrame(other1) failed")
		}
		frames = append(frames, f)
		if i%50 == 0 {
			g, _ := c.AllocFrame()
			h, _ := c2.AllocFrame()
			frames = append(frames, g, Frame{}, h)
		}
	}
	c1.Drain()
	c2.Drain()
	ownCached := c.Len()
	c.FreeFrames(frames)
	if got := other1.FreeCount(); got != 200 {
		t.Errorf("other1 FreeCount() = %d, want 200", got)
	}
	if got := other2.FreeCount(); got != 10 {
		t.Errorf("other2 FreeCount() = %d, want 10", got)
	}
	if got := c.Len(); got != ownCached+3 {
		t.Errorf("own cache Len() = %d, want %d", got, ownCached+3)
	}
	// No allocation on the way.
	frames = frames[:0]
	for range 100 {
		f, _ := c1.AllocFrame()
		frames = append(frames, f)
	}
	allocs := testing.AllocsPerRun(100, func() {
		c.FreeFrames(frames)
		for i := range frames {
			frames[i], _ = c1.AllocFrame()
		}
	})
	if allocs != 0 {
		t.Errorf("FreeFrames of foreign frames: %v allocs per run, want 0", allocs)
	}
}

func BenchmarkCacheAllocFree(b *testing.B) {
	p := newTestPool(b, 4096)
	c := NewCache(p)
	frames := make([]Frame, 64)
	b.ReportAllocs()
	for b.Loop() {
		for i := range frames {
			frames[i], _ = c.AllocFrame()
		}
		c.FreeFrames(frames)
	}
	b.ReportMetric(float64(b.N*len(frames))/b.Elapsed().Seconds(), "pps")
}

// TestCacheAllocFrames checks that AllocFrames hands out the chunks
// AllocFrame would, in the same order, across refills, and stops short
// when the pool runs out.
func TestCacheAllocFrames(t *testing.T) {
	const n = 2*CacheBatch + 37
	p1, p2 := newTestPool(t, n), newTestPool(t, n)
	one, bulk := NewCache(p1), NewCache(p2)
	frames := make([]Frame, 100)
	total := 0
	for {
		k := bulk.AllocFrames(frames)
		for i := range k {
			f, ok := one.AllocFrame()
			if !ok {
				t.Fatalf("AllocFrame #%d = false, AllocFrames gave a frame", total+i)
			}
			g := frames[i]
			if g.Pool() != p2 || g.Chunk() != f.Chunk() || g.Headroom() != f.Headroom() || g.Len() != 0 {
				t.Fatalf("frame #%d: AllocFrames chunk %#x headroom %d len %d, AllocFrame chunk %#x headroom %d",
					total+i, g.Chunk(), g.Headroom(), g.Len(), f.Chunk(), f.Headroom())
			}
		}
		total += k
		if k < len(frames) {
			break
		}
	}
	if total != n {
		t.Errorf("AllocFrames gave %d frames of a %d-frame pool", total, n)
	}
	if k := bulk.AllocFrames(frames); k != 0 {
		t.Errorf("AllocFrames on an empty pool = %d, want 0", k)
	}
	if a := testing.AllocsPerRun(10, func() { bulk.AllocFrames(frames) }); a != 0 {
		t.Errorf("AllocFrames allocates %v times", a)
	}
}

// TestWarm checks that Warm reads each frame's first byte and the byte a
// cache line in (when the data reaches it), skips empty frames and does
// not allocate.
func TestWarm(t *testing.T) {
	p := newTestPool(t, 4)
	c := NewCache(p)
	frames := make([]Frame, 3)
	if n := c.AllocFrames(frames); n != 3 {
		t.Fatalf("AllocFrames = %d", n)
	}
	frames[0].SetLen(10)
	frames[0].Data()[0] = 0x01
	frames[1].SetLen(100)
	frames[1].Data()[0] = 0x02
	frames[1].Data()[64] = 0x04
	frames[1].Data()[65] = 0x80 // not read
	// frames[2] is empty: not read.
	if got := Warm(frames); got != 0x07 {
		t.Errorf("Warm = %#x, want 0x07", got)
	}
	if a := testing.AllocsPerRun(10, func() { Warm(frames) }); a != 0 {
		t.Errorf("Warm allocates %v times", a)
	}
}

// TestFrameRoomHugeN: a length of 2^32 or more (an int on a 64-bit
// machine) is past any headroom, data or chunk, whatever its low 32 bits:
// Prepend, Grow, TrimFront and Reset refuse it and change nothing.
func TestFrameRoomHugeN(t *testing.T) {
	if strconv.IntSize < 64 {
		return // no int reaches 2^32
	}
	p := newTestPool(t, 2)
	c := NewCache(p)
	f, ok := c.AllocFrame()
	if !ok {
		t.Fatal("AllocFrame = false, want a frame")
	}
	f.SetLen(100)
	before := f
	big := uint64(1) << 32
	for _, low := range []uint64{0, 1, 14} {
		n := int(big + low)
		if f.Prepend(n) != nil || f.Grow(n) || f.TrimFront(n) || f.Reset(n) || f != before {
			t.Errorf("Prepend, Grow, TrimFront or Reset(2^32 + %d) took it: frame %+v, want %+v", low, f, before)
		}
	}
	c.FreeFrames([]Frame{f})
}
