package replay

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	wgreplay "golang.zx2c4.com/wireguard/replay"

	"github.com/wgpio/wgpio/protocol"
)

// The reference in these benchmarks is stock wireguard-go's replay.Filter
// (8,128 counters) behind a sync.Mutex, as it must be when several queues
// share one keypair. Compare ns/counter between wgpio and wggo lines of the
// same run:
//
//	go test ./replay -run XXX -bench . -benchmem -count 1

// lockedFilter is wireguard-go's filter made shareable.
type lockedFilter struct {
	mu sync.Mutex
	f  wgreplay.Filter
}

func (l *lockedFilter) check(c, limit uint64) bool {
	l.mu.Lock()
	ok := l.f.ValidateCounter(c, limit)
	l.mu.Unlock()
	return ok
}

func (l *lockedFilter) checkBatch(cs []uint64, limit uint64, acc []bool) int {
	l.mu.Lock()
	n := 0
	for i, c := range cs {
		acc[i] = l.f.ValidateCounter(c, limit)
		if acc[i] {
			n++
		}
	}
	l.mu.Unlock()
	return n
}

const benchBatch = 64

// reportPerCounter reports ns per counter and counters per second.
func reportPerCounter(b *testing.B, counters int) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(counters)
	b.ReportMetric(ns, "ns/counter")
	b.ReportMetric(1e9/ns, "pps")
}

func BenchmarkSingle(b *testing.B) {
	impls := []struct {
		name  string
		check func(c uint64) bool
	}{
		{"wgpio-Window", func() func(uint64) bool {
			w := new(Window)
			return func(c uint64) bool { return w.Check(c, protocol.RejectAfterMessages) }
		}()},
		{"wgpio-SharedWindow", func() func(uint64) bool {
			s := new(SharedWindow)
			return func(c uint64) bool { return s.Check(c, protocol.RejectAfterMessages) }
		}()},
		{"wggo-Filter", func() func(uint64) bool {
			f := new(wgreplay.Filter)
			return func(c uint64) bool { return f.ValidateCounter(c, protocol.RejectAfterMessages) }
		}()},
		{"wggo-Filter+mutex", func() func(uint64) bool {
			l := new(lockedFilter)
			return func(c uint64) bool { return l.check(c, protocol.RejectAfterMessages) }
		}()},
	}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(8) // one counter
			var c uint64
			for b.Loop() {
				if !impl.check(c) {
					b.Fatalf("check(%d) = false, want true", c)
				}
				c++
			}
			reportPerCounter(b, int(c))
		})
	}
}

// batchImpl is one way of checking one received batch; make returns the
// check function over a fresh, empty window.
type batchImpl struct {
	name string
	make func() func(cs []uint64, acc []bool) int
}

var batchImpls = []batchImpl{
	{"wgpio-Window", func() func([]uint64, []bool) int {
		w := new(Window)
		return func(cs []uint64, acc []bool) int { return w.CheckBatch(cs, protocol.RejectAfterMessages, acc) }
	}},
	{"wgpio-SharedWindow", func() func([]uint64, []bool) int {
		s := new(SharedWindow)
		return func(cs []uint64, acc []bool) int { return s.CheckBatch(cs, protocol.RejectAfterMessages, acc) }
	}},
	// The reference: lock per counter, as wireguard-go's receive path does.
	{"wggo-Filter+mutex-per-counter", func() func([]uint64, []bool) int {
		l := new(lockedFilter)
		return func(cs []uint64, acc []bool) int {
			n := 0
			for i, c := range cs {
				acc[i] = l.check(c, protocol.RejectAfterMessages)
				if acc[i] {
					n++
				}
			}
			return n
		}
	}},
	// The seed report's patch 2 on wireguard-go: lock per batch.
	{"wggo-Filter+mutex-per-batch", func() func([]uint64, []bool) int {
		l := new(lockedFilter)
		return func(cs []uint64, acc []bool) int { return l.checkBatch(cs, protocol.RejectAfterMessages, acc) }
	}},
}

func BenchmarkBatch64(b *testing.B) {
	// Shuffled: the 4096 counters of each span in a random order, cut into
	// 64 batches; every counter is within both windows of the newest.
	const span = 4096
	perm := rand.New(rand.NewPCG(64, 4096)).Perm(span)
	orders := []struct {
		name string
		fill func(cs []uint64, i uint64) // counters of batch number i
	}{
		{"inorder", func(cs []uint64, i uint64) {
			base := i * benchBatch
			for j := range cs {
				cs[j] = base + uint64(j)
			}
		}},
		{"shuffled4096", func(cs []uint64, i uint64) {
			base := i / (span / benchBatch) * span
			off := perm[i%(span/benchBatch)*benchBatch:][:benchBatch]
			for j := range cs {
				cs[j] = base + uint64(off[j])
			}
		}},
	}
	for _, order := range orders {
		for _, impl := range batchImpls {
			b.Run(order.name+"/"+impl.name, func(b *testing.B) {
				check := impl.make()
				b.ReportAllocs()
				b.SetBytes(8 * benchBatch)
				cs := make([]uint64, benchBatch)
				acc := make([]bool, benchBatch)
				var i uint64
				for b.Loop() {
					order.fill(cs, i)
					if n := check(cs, acc); n != benchBatch {
						b.Fatalf("batch %d: %d accepted, want %d", i, n, benchBatch)
					}
					i++
				}
				reportPerCounter(b, int(i)*benchBatch)
			})
		}
	}
}

// BenchmarkParallel64 has every goroutine reserve 64 counters at a time
// from one sender counter and check them on one shared window, as the RX
// queues of one keypair do. On a loaded machine the figures are noisy.
func BenchmarkParallel64(b *testing.B) {
	for _, impl := range batchImpls[1:] { // the shareable forms
		b.Run(impl.name, func(b *testing.B) {
			check := impl.make() // fresh for each b.N: counters restart at 0
			b.ReportAllocs()
			b.SetBytes(8 * benchBatch)
			var next atomic.Uint64
			var rejected atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				cs := make([]uint64, benchBatch)
				acc := make([]bool, benchBatch)
				for pb.Next() {
					base := next.Add(benchBatch) - benchBatch
					for j := range cs {
						cs[j] = base + uint64(j)
					}
					if n := check(cs, acc); n != benchBatch {
						rejected.Add(int64(benchBatch - n))
					}
				}
			})
			reportPerCounter(b, int(next.Load()))
			b.ReportMetric(float64(rejected.Load())/float64(next.Load()), "rejected/counter")
		})
	}
}
