//go:build linux

package afxdp

import (
	"math"
	"runtime"
	"sync"
	"testing"
)

// testRings returns a producer view and a consumer view of one ring of n
// entries on plain memory, both indexes starting at start.
func testRings(n int, start uint32) (p, c *ring[uint64]) {
	prod, cons, flags := new(uint32), new(uint32), new(uint32)
	*prod, *cons = start, start
	descs := make([]uint64, n)
	return newRing(prod, cons, flags, descs), newRing(prod, cons, flags, descs)
}

func TestRingWrapAround(t *testing.T) {
	for _, start := range []uint32{0, math.MaxUint32 - 3, math.MaxUint32, 1 << 31} {
		for _, size := range []int{1, 2, 8, 64} {
			p, c := testRings(size, start)
			next, want := uint64(0), uint64(0)
			// Push and pop enough to wrap the 32-bit index region several times
			// when start is near MaxUint32, with every burst size 1..size.
			for burst := 1; burst <= size; burst++ {
				for round := 0; round < 3; round++ {
					if got := p.free(uint32(size)); got != uint32(size) {
						t.Fatalf("start %d size %d: free(%d) = %d, want %d (empty ring)", start, size, size, got, size)
					}
					for i := 0; i < burst; i++ {
						*p.slot(uint32(i)) = next
						next++
					}
					p.submit(uint32(burst))
					if got := c.avail(1); got != uint32(burst) {
						t.Fatalf("start %d size %d: avail = %d, want %d", start, size, got, burst)
					}
					for i := 0; i < burst; i++ {
						if got := *c.entry(uint32(i)); got != want {
							t.Fatalf("start %d size %d burst %d: entry(%d) = %d, want %d", start, size, burst, i, got, want)
						}
						want++
					}
					c.release(uint32(burst))
				}
			}
		}
	}
}

func TestRingFullEmpty(t *testing.T) {
	const size = 16
	p, c := testRings(size, math.MaxUint32-5)
	if got := c.avail(1); got != 0 {
		t.Fatalf("avail on empty ring = %d, want 0", got)
	}
	p.submit(size)
	if got := p.free(1); got != 0 {
		t.Fatalf("free on full ring = %d, want 0", got)
	}
	if got := c.avail(1); got != size {
		t.Fatalf("avail on full ring = %d, want %d", got, size)
	}
	c.release(3)
	// The producer's cached consumer index is stale: free(1) must reload.
	if got := p.free(1); got != 3 {
		t.Fatalf("free after release(3) = %d, want 3", got)
	}
	c.release(size - 3)
	if got := c.avail(1); got != 0 {
		t.Fatalf("avail after draining = %d, want 0", got)
	}
	if got := p.pending(); got != 0 {
		t.Fatalf("pending after draining = %d, want 0", got)
	}
}

func TestRingNeedWakeup(t *testing.T) {
	p, _ := testRings(4, 0)
	if p.needWakeup() {
		t.Fatal("needWakeup() = true with flags 0, want false")
	}
	*p.flags = xdpRingNeedWakeup
	if !p.needWakeup() {
		t.Fatal("needWakeup() = false with XDP_RING_NEED_WAKEUP, want true")
	}
}

// TestRingConcurrent runs a producer and a consumer goroutine through
// 3×10^5 entries across the 32-bit wrap, checking order and that nothing is lost.
func TestRingConcurrent(t *testing.T) {
	const size, total = 64, 300_000
	p, c := testRings(size, math.MaxUint32-1000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var next uint64
		for next < total {
			n := p.free(1)
			if n == 0 {
				runtime.Gosched()
				continue
			}
			n = min(n, uint32(total-next), uint32(next%size)+1)
			for i := uint32(0); i < n; i++ {
				*p.slot(i) = next
				next++
			}
			p.submit(n)
		}
	}()
	var want uint64
	for want < total {
		n := c.avail(1)
		if n == 0 {
			runtime.Gosched()
		}
		for i := uint32(0); i < n; i++ {
			if got := *c.entry(i); got != want {
				t.Errorf("entry = %d, want %d", got, want)
				wg.Wait()
				return
			}
			want++
		}
		c.release(n)
	}
	wg.Wait()
}
