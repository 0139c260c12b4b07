package memport

import (
	"runtime"
	"sync"
	"testing"
)

// The ring's arithmetic on plain memory, against a slice as the obvious
// reference FIFO.

func TestRingWrapAround(t *testing.T) {
	starts := []uint32{0, 1 << 31, ^uint32(0) - 2, ^uint32(0) - 15, ^uint32(0)}
	for _, size := range []int{1, 2, 8, 64} {
		for _, start := range starts {
			r := newRing(size, start)
			p, c := newProducer(r), newConsumer(r)
			var ref []desc
			next := uint64(1)
			// Push and pop in uneven amounts across the 2^32 boundary.
			for step := range 200 {
				push := uint32(step%(size+1) + 1)
				free := p.free(uint32(size)) // asks for all: exact answer
				if want := uint32(size - len(ref)); free != want {
					t.Fatalf("size %d start %#x step %d: free() = %d, want %d", size, start, step, free, want)
				}
				for range min(push, free) {
					d := desc{addr: next, len: uint32(next)}
					next++
					p.put(d)
					ref = append(ref, d)
				}
				p.publish()
				pop := uint32(step%3 + 1)
				avail := c.avail(uint32(size))
				if avail != uint32(len(ref)) {
					t.Fatalf("size %d start %#x step %d: avail() = %d, want %d", size, start, step, avail, len(ref))
				}
				for range min(pop, avail) {
					got := c.get()
					if got != ref[0] {
						t.Fatalf("size %d start %#x step %d: get() = %+v, want %+v", size, start, step, got, ref[0])
					}
					ref = ref[1:]
				}
				c.release()
			}
			if r.prod.Load()-start < 200 {
				t.Errorf("size %d start %#x: only %d entries crossed, want the wrap exercised", size, start, r.prod.Load()-start)
			}
		}
	}
}

func TestRingFullEmpty(t *testing.T) {
	for _, start := range []uint32{0, ^uint32(0) - 3} {
		const size = 8
		r := newRing(size, start)
		p, c := newProducer(r), newConsumer(r)
		if got := c.avail(1); got != 0 {
			t.Errorf("start %#x: avail() on an empty ring = %d, want 0", start, got)
		}
		if c.pending() {
			t.Errorf("start %#x: pending() on an empty ring = true", start)
		}
		for i := range size {
			if p.free(1) == 0 {
				t.Fatalf("start %#x: free() = 0 after %d puts, want room", start, i)
			}
			p.put(desc{addr: uint64(i)})
		}
		if got := p.free(1); got != 0 {
			t.Errorf("start %#x: free() on a full ring = %d, want 0", start, got)
		}
		// Not published: the consumer sees nothing yet.
		if got := c.avail(1); got != 0 {
			t.Errorf("start %#x: avail() before publish = %d, want 0", start, got)
		}
		p.publish()
		if got := c.avail(size); got != size || !c.pending() {
			t.Errorf("start %#x: avail() on a full ring = %d, want %d", start, got, size)
		}
		c.get()
		// Not released: the producer still sees a full ring.
		if got := p.free(1); got != 0 {
			t.Errorf("start %#x: free() before release = %d, want 0", start, got)
		}
		c.release()
		if got := p.free(1); got != 1 {
			t.Errorf("start %#x: free() after one release = %d, want 1", start, got)
		}
		for range size - 1 {
			c.get()
		}
		c.release()
		if got, pend := c.avail(1), c.pending(); got != 0 || pend {
			t.Errorf("start %#x: after draining avail() = %d, pending() = %v; want 0, false", start, got, pend)
		}
		if got := p.free(size); got != size {
			t.Errorf("start %#x: free() on a drained ring = %d, want %d", start, got, size)
		}
	}
}

// TestRingCachedIndexes checks that the cached copies are refreshed only
// when they say there is too little.
func TestRingCachedIndexes(t *testing.T) {
	r := newRing(16, 0)
	p, c := newProducer(r), newConsumer(r)
	for range 10 {
		p.put(desc{})
	}
	p.publish()
	if got := c.avail(4); got != 10 {
		t.Fatalf("avail(4) = %d, want 10", got)
	}
	for range 4 {
		c.get()
	}
	// Producer adds more, but 6 cached entries satisfy want=6 without a load.
	for range 3 {
		p.put(desc{})
	}
	p.publish()
	if got := c.avail(6); got != 6 {
		t.Errorf("avail(6) with 6 cached = %d, want 6 (no reload)", got)
	}
	if got := c.avail(7); got != 9 {
		t.Errorf("avail(7) = %d, want 9 (reloaded)", got)
	}
}

func TestRingBatchSizes(t *testing.T) {
	const size = 64
	for batch := 1; batch <= size; batch++ {
		r := newRing(size, ^uint32(0)-uint32(batch))
		p, c := newProducer(r), newConsumer(r)
		next := uint64(0)
		want := uint64(0)
		for range 3*size/batch + 2 {
			n := min(p.free(uint32(batch)), uint32(batch))
			if n != uint32(batch) {
				t.Fatalf("batch %d: free() = %d on a drained ring", batch, n)
			}
			for range n {
				p.put(desc{addr: next})
				next++
			}
			p.publish()
			got := c.avail(uint32(batch))
			if got != n {
				t.Fatalf("batch %d: avail() = %d, want %d", batch, got, n)
			}
			for range got {
				if d := c.get(); d.addr != want {
					t.Fatalf("batch %d: get() = %d, want %d", batch, d.addr, want)
				}
				want++
			}
			c.release()
		}
	}
}

// TestRingConcurrent moves 2^18 descriptors between two goroutines in
// bursts; with -race it checks the ordering rule.
func TestRingConcurrent(t *testing.T) {
	const total = 1 << 18
	r := newRing(256, ^uint32(0)-1000)
	var wg sync.WaitGroup
	wg.Go(func() {
		p := newProducer(r)
		for sent := uint64(0); sent < total; {
			n := min(uint64(p.free(32)), 32, total-sent)
			if n == 0 {
				runtime.Gosched()
			}
			for range n {
				p.put(desc{addr: sent, len: uint32(sent)})
				sent++
			}
			p.publish()
		}
	})
	c := newConsumer(r)
	for got := uint64(0); got < total; {
		n := c.avail(64)
		if n == 0 {
			runtime.Gosched()
		}
		for range n {
			d := c.get()
			if d.addr != got || d.len != uint32(got) {
				t.Fatalf("get() = %+v, want addr %d", d, got)
			}
			got++
		}
		c.release()
	}
	wg.Wait()
}
