package dataplanetest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// Counters: what Stats and the pool say after traffic, and the shared free
// cache of a queue pair.

func (s *suite) testAccounting(t *testing.T, queues int) {
	p := s.open(t, queues)
	if _, ok := p.a.(dataplane.Accounter); !ok {
		t.Fatalf("%T does not implement dataplane.Accounter", p.a)
	}
	total := s.opts.Frames
	var sent, returned, bDropped atomic.Int64
	var stopA, done atomic.Bool
	var wg sync.WaitGroup
	// Frames in flight: a lossless pair pushes back by itself (short
	// Transmit, short Alloc), a lossy one drops past its ring sizes.
	window := int64(512 * queues)
	if s.opts.Lossy {
		window = int64(256 * queues)
	}
	// a: send, and receive what b reflects.
	wg.Go(func() {
		buf := make([]dataplane.Frame, 64)
		var seq uint64
		for !done.Load() {
			got := false
			for qi := range queues {
				rx := p.a.Queue(qi).RX()
				if n := rx.Receive(buf); n > 0 {
					returned.Add(int64(n))
					rx.Free(buf[:n])
					got = true
				}
			}
			if stopA.Load() || sent.Load() >= int64(total) {
				if !got {
					// Nothing to do but wait for b: let it (and the
					// waiter) run, as with one P they otherwise wait
					// for a preemption every round.
					runtime.Gosched()
				}
				continue
			}
			if sent.Load()-returned.Load()-bDropped.Load() > window {
				if s.opts.Lossy {
					time.Sleep(50 * time.Microsecond)
				} else {
					runtime.Gosched()
					continue
				}
			}
			for qi := range queues {
				rem := int64(total) - sent.Load()
				if rem <= 0 {
					break
				}
				tx := p.a.Queue(qi).TX()
				n := tx.Alloc(buf[:min(int64(len(buf)), rem)])
				for i := range n {
					f := p.flowOf(qi, int(seq))
					build(&buf[i], 64, p.ea, p.eb, tag{dir: dirAB, flow: f, seq: seq})
					seq++
				}
				m := tx.Transmit(buf[:n])
				tx.Free(buf[m:n])
				sent.Add(int64(m))
				if n == 0 {
					tx.Reclaim()
				}
				if m < n || n == 0 {
					runtime.Gosched() // the ring is full: let b drain it
				}
			}
		}
	})
	// b: reflect what arrives back to a, from the queue it arrived on.
	wg.Go(func() {
		buf := make([]dataplane.Frame, 64)
		for !done.Load() {
			got := false
			for qi := range queues {
				q := p.b.Queue(qi)
				n := q.RX().Receive(buf)
				for i := range n {
					reflect(buf[i].Data())
				}
				m := q.TX().Transmit(buf[:n])
				if m < n {
					q.TX().Free(buf[m:n])
					bDropped.Add(int64(n - m))
				}
				if n == 0 {
					q.TX().Reclaim()
				}
				got = got || n > 0
			}
			if !got {
				runtime.Gosched() // as a's: nothing arrived
			}
		}
	})
	// Wait for the sender, then for the traffic to settle; give up only
	// when nothing moved for the timeout (a loaded machine is slow, not
	// stuck).
	last, progress := int64(-1), time.Now()
	for sent.Load() < int64(total) && time.Since(progress) < s.opts.Timeout {
		if n := sent.Load(); n != last {
			last, progress = n, time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopA.Store(true)
	settle := s.opts.Timeout // lossless: every frame must come back
	if s.opts.Lossy {
		settle = time.Second // lossy: the stragglers are lost by now
	}
	last, progress = -1, time.Now()
	for time.Since(progress) < settle {
		r := returned.Load() + bDropped.Load()
		if r != last {
			last, progress = r, time.Now()
		}
		if r == sent.Load() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	p.reclaimAll()
	p.drain(p.a, 0)
	p.drain(p.b, 0)
	t.Logf("sent %d, returned %d, dropped by b's full TX %d", sent.Load(), returned.Load(), bDropped.Load())
	if sent.Load() < int64(total) {
		t.Errorf("sent %d of %d frames, then nothing for %v", sent.Load(), total, s.opts.Timeout)
	}
	if !s.opts.Lossy && returned.Load()+bDropped.Load() != sent.Load() {
		t.Errorf("returned %d + dropped %d frames, want the %d sent", returned.Load(), bDropped.Load(), sent.Load())
	}
	CheckAccounting(t, p.a, p.b)
}

func (s *suite) testSharedCache(t *testing.T) {
	p := s.open(t, 1)
	qa, qb := p.a.Queue(0), p.b.Queue(0)
	sa, ok := qa.(dataplane.CacheSharer)
	if !ok {
		t.Skipf("%T does not implement dataplane.CacheSharer", qa)
	}
	sb, ok := qb.(dataplane.CacheSharer)
	if !ok {
		t.Fatalf("%T implements dataplane.CacheSharer and %T does not", qa, qb)
	}
	shared := sa.Cache()
	if shared == nil || shared.Pool() == nil {
		t.Fatalf("Cache() = %v, want a cache of the queue's pool", shared)
	}
	used := sb.UseCache(shared)
	t.Logf("b's queue took a's cache: %v", used)
	if !sa.UseCache(shared) {
		t.Errorf("UseCache(its own cache) = false, want true")
	}
	total := min(s.opts.Frames, 4096)
	buf := make([]dataplane.Frame, 32)
	var seq uint64
	sent, returned, dropped := 0, 0, 0
	progress := time.Now()
	for returned+dropped < total && time.Since(progress) < s.opts.Timeout {
		moved := false
		if sent < total && sent-returned-dropped < 256 {
			tx := qa.TX()
			n := tx.Alloc(buf[:min(len(buf), total-sent)])
			for i := range n {
				build(&buf[i], 64, p.ea, p.eb, tag{dir: dirAB, flow: p.flowOf(0, int(seq)), seq: seq})
				seq++
			}
			m := tx.Transmit(buf[:n])
			tx.Free(buf[m:n])
			sent += m
			moved = moved || m > 0
			if n == 0 {
				tx.Reclaim()
			}
		}
		if n := qb.RX().Receive(buf); n > 0 {
			for i := range n {
				reflect(buf[i].Data())
			}
			m := qb.TX().Transmit(buf[:n])
			qb.TX().Free(buf[m:n])
			dropped += n - m
			moved = true
		} else {
			qb.TX().Reclaim()
		}
		if n := qa.RX().Receive(buf); n > 0 {
			qa.RX().Free(buf[:n])
			returned += n
			moved = true
		}
		if moved {
			progress = time.Now()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	p.reclaimAll()
	p.drain(p.a, 0)
	p.drain(p.b, 0)
	t.Logf("sent %d, returned %d, dropped by b's full TX %d", sent, returned, dropped)
	if sent < total {
		t.Errorf("sent %d of %d frames", sent, total)
	}
	if !s.opts.Lossy && returned+dropped != sent {
		t.Errorf("returned %d + dropped %d frames, want the %d sent", returned, dropped, sent)
	}
	CheckAccounting(t, p.a, p.b)
}

// CheckAccounting checks that every buffer of every pool of the ports is in
// exactly one place: on its pool's shared free list or reported once by one
// port's AccountBuffers. Call it after traffic stopped and every frame the
// test held was freed, with no goroutine using the ports. Ports must
// implement dataplane.Accounter.
func CheckAccounting(t testing.TB, ports ...dataplane.Port) {
	t.Helper()
	seen := make(map[*dataplane.Pool][]int) // chunk index -> count
	where := make(map[*dataplane.Pool]map[int][]string)
	addPool := func(pl *dataplane.Pool) {
		if _, ok := seen[pl]; !ok {
			seen[pl] = make([]int, pl.NumFrames())
			where[pl] = make(map[int][]string)
		}
	}
	note := func(pl *dataplane.Pool, chunk uint64, place string) {
		addPool(pl)
		i := int(chunk / uint64(pl.FrameSize()))
		if chunk%uint64(pl.FrameSize()) != 0 || i >= pl.NumFrames() {
			t.Errorf("%s: chunk %#x is not a chunk of the pool", place, chunk)
			return
		}
		seen[pl][i]++
		if len(where[pl][i]) < 4 {
			where[pl][i] = append(where[pl][i], place)
		}
	}
	for _, port := range ports {
		acc, ok := port.(dataplane.Accounter)
		if !ok {
			t.Fatalf("%T does not implement dataplane.Accounter", port)
		}
		for _, pl := range acc.Pools() {
			addPool(pl)
		}
		acc.AccountBuffers(note)
	}
	for pl := range seen {
		for _, ch := range pl.AppendFree(nil) {
			note(pl, ch, "pool free list")
		}
	}
	for pl, counts := range seen {
		missing, dup := 0, 0
		for i, c := range counts {
			switch {
			case c == 0:
				if missing++; missing <= 4 {
					t.Errorf("pool %p: chunk %#x is nowhere", pl, uint64(i)*uint64(pl.FrameSize()))
				}
			case c > 1:
				if dup++; dup <= 4 {
					t.Errorf("pool %p: chunk %#x is in %d places: %v", pl, uint64(i)*uint64(pl.FrameSize()), c, where[pl][i])
				}
			}
		}
		if missing+dup > 0 {
			t.Errorf("pool %p of %d buffers: %d lost, %d in two places or more", pl, pl.NumFrames(), missing, dup)
		}
	}
}
