package chachapoly

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchBurst is a burst of 64 packets and the same packets for x/crypto.
type benchBurst struct {
	pkts   []Packet
	aeads  []cipher.AEAD // x/crypto AEAD of each packet's key
	sealed [][]byte      // sealed copies, to restore before each open
	ok     []bool
	nonce  []byte // x/crypto's nonce buffer, reused (no allocation)
}

var benchSizes = []struct {
	name string
	lens func(i int) int
}{
	{"64", func(int) int { return 64 }},
	{"128", func(int) int { return 128 }},
	{"512", func(int) int { return 512 }},
	{"1420", func(int) int { return 1420 }},
	// Mixed: like an IMIX, mostly small with some full-size packets.
	{"mixed", func(i int) int { return []int{64, 64, 128, 1420, 64, 576, 64, 1420}[i%8] }},
}

func newBenchBurst(b *testing.B, lens func(int) int, nkeys int) *benchBurst {
	rng := rand.New(rand.NewPCG(9, 10))
	var refs []*ref
	for range nkeys {
		refs = append(refs, newRef(b, rng))
	}
	bb := &benchBurst{ok: make([]bool, 64), nonce: make([]byte, 12)}
	for i := range 64 {
		r := refs[i%nkeys]
		p := Packet{Key: &r.k, Counter: uint64(i), Data: make([]byte, lens(i)+TagSize)}
		bb.pkts = append(bb.pkts, p)
		bb.aeads = append(bb.aeads, r.a)
	}
	Seal(bb.pkts)
	for _, p := range bb.pkts {
		bb.sealed = append(bb.sealed, append([]byte(nil), p.Data...))
	}
	return bb
}

func (bb *benchBurst) restore() {
	for i, p := range bb.pkts {
		copy(p.Data, bb.sealed[i])
	}
}

// pair accumulates the times of the burst call and of the x/crypto loop of
// each iteration. Besides the sums it keeps the fastest iteration of each:
// on a shared, loaded machine the minimum is the least disturbed figure, so
// min-ratio (fastest burst / fastest x/crypto) is reported next to ratio.
type pair struct {
	burst, ref       time.Duration
	minBurst, minRef time.Duration
}

func (p *pair) add(burst, ref time.Duration) {
	p.burst += burst
	p.ref += ref
	if p.minBurst == 0 || burst < p.minBurst {
		p.minBurst = burst
	}
	if p.minRef == 0 || ref < p.minRef {
		p.minRef = ref
	}
}

func (p *pair) report(b *testing.B, pkts int) {
	pk := float64(b.N) * float64(pkts)
	b.ReportMetric(float64(p.burst.Nanoseconds())/pk, "ns/pkt")
	b.ReportMetric(float64(p.ref.Nanoseconds())/pk, "xcrypto-ns/pkt")
	b.ReportMetric(float64(p.burst)/float64(p.ref), "ratio")
	b.ReportMetric(float64(p.minBurst.Nanoseconds())/float64(pkts), "min-ns/pkt")
	b.ReportMetric(float64(p.minRef.Nanoseconds())/float64(pkts), "min-xcrypto-ns/pkt")
	b.ReportMetric(float64(p.minBurst)/float64(p.minRef), "min-ratio")
}

// BenchmarkBurst measures Seal and Open of 64 packets against x/crypto's
// chacha20poly1305 sealing or opening the same 64 packets one call at a
// time, in the same loop. Metrics: ns/pkt (burst), xcrypto-ns/pkt, and
// ratio = burst / x/crypto (below 1 is faster).
func BenchmarkBurst(b *testing.B) {
	for _, im := range supported() {
		b.Run(im.String(), func(b *testing.B) {
			setImpl(b, im)
			benchBurstImpl(b)
		})
	}
}

func benchBurstImpl(b *testing.B) {
	for _, op := range []string{"seal", "open"} {
		for _, sz := range benchSizes {
			for _, nkeys := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/%s/keys=%d", op, sz.name, nkeys), func(b *testing.B) {
					bb := newBenchBurst(b, sz.lens, nkeys)
					var bytes int
					for _, p := range bb.pkts {
						bytes += len(p.Data) - TagSize
					}
					b.SetBytes(int64(bytes))
					b.ReportAllocs()
					var tp pair
					for b.Loop() {
						if op == "open" {
							bb.restore()
						}
						t0 := time.Now()
						if op == "seal" {
							Seal(bb.pkts)
						} else if Open(bb.pkts, bb.ok) != 0 {
							b.Fatal("open failed")
						}
						t1 := time.Now()
						if op == "open" {
							bb.restore()
						}
						t2 := time.Now()
						for i := range bb.pkts {
							p := &bb.pkts[i]
							n := bb.nonce
							binary.LittleEndian.PutUint64(n[4:], p.Counter)
							m := len(p.Data) - TagSize
							if op == "seal" {
								bb.aeads[i].Seal(p.Data[:0], n, p.Data[:m], nil)
							} else if _, err := bb.aeads[i].Open(p.Data[:0], n, p.Data, nil); err != nil {
								b.Fatal(err)
							}
						}
						t3 := time.Now()
						tp.add(t1.Sub(t0), t3.Sub(t2))
					}
					tp.report(b, len(bb.pkts))
				})
			}
		}
	}
}

// BenchmarkShortRun measures Seal of short runs (1 to 64 packets of 64
// bytes) against x/crypto in the same loop: it decides below which run
// length the burst path is not worth it (see minRun).
func BenchmarkShortRun(b *testing.B) {
	for _, im := range supported()[1:] {
		b.Run(im.String(), func(b *testing.B) {
			setImpl(b, im)
			benchShortRun(b)
		})
	}
}

func benchShortRun(b *testing.B) {
	for _, size := range []int{64, 1420} {
		for _, n := range []int{1, 2, 3, 4, 6, 8, 16, 64} {
			b.Run(fmt.Sprintf("%d/n=%d", size, n), func(b *testing.B) {
				bb := newBenchBurst(b, func(int) int { return size }, 1)
				pkts := bb.pkts[:n]
				var tp pair
				for b.Loop() {
					t0 := time.Now()
					Seal(pkts)
					t1 := time.Now()
					for i := range pkts {
						p := &pkts[i]
						binary.LittleEndian.PutUint64(bb.nonce[4:], p.Counter)
						m := len(p.Data) - TagSize
						bb.aeads[i].Seal(p.Data[:0], bb.nonce, p.Data[:m], nil)
					}
					t2 := time.Now()
					tp.add(t1.Sub(t0), t2.Sub(t1))
				}
				tp.report(b, n)
			})
		}
	}
}
