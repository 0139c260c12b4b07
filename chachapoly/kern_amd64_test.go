//go:build !purego

package chachapoly

import (
	"testing"
	"time"
)

// BenchmarkKernels measures one 16-lane pass of each assembly kernel (one
// ChaCha20 block in 16 lanes; one Poly1305 block in 16 lanes); min-ns is
// the fastest of batches of 10 calls, the figure least disturbed by other
// load.
func BenchmarkKernels(b *testing.B) {
	if !hasIFMA {
		b.Skip("needs AVX-512 IFMA")
	}
	minOf := func(b *testing.B, f func()) {
		best := time.Duration(1 << 62)
		for b.Loop() {
			t0 := time.Now()
			for range 10 {
				f()
			}
			best = min(best, time.Since(t0))
		}
		b.ReportMetric(float64(best.Nanoseconds())/10, "min-ns")
	}
	b.Run("poly8-load-place-tag", func(b *testing.B) {
		var pg poly8Group
		var pk [32]byte
		var tag [TagSize]byte
		msg := make([]byte, 64)
		minOf(b, func() {
			for l := range poly8Lanes {
				pg.load(l, &pk, msg)
			}
			for l := range poly8Lanes {
				pg.place(l, 5)
			}
			for l := range poly8Lanes {
				pg.tag(l, &pk, &tag)
			}
		})
	})
	b.Run("chacha16-block", func(b *testing.B) {
		var g group
		minOf(b, func() { chacha16(&g, 1) })
	})
	b.Run("chacha8-block", func(b *testing.B) {
		var g group
		minOf(b, func() { chacha8(&g, 1) })
	})
	b.Run("poly16-block", func(b *testing.B) {
		var pg polyGroup
		var pk [32]byte
		for l := range lanes {
			pg.load(l, &pk, nil)
		}
		minOf(b, func() { poly16(&pg, 1) })
	})
	b.Run("poly8-block", func(b *testing.B) {
		var pg poly8Group
		var pk [32]byte
		for l := range poly8Lanes {
			pg.load(l, &pk, nil)
			pg.place(l, 1)
		}
		minOf(b, func() { poly8(&pg, 1) })
	})
	b.Run("poly8-5blocks", func(b *testing.B) {
		var pg poly8Group
		var pk [32]byte
		msg := make([]byte, 64)
		for l := range poly8Lanes {
			pg.load(l, &pk, msg)
			pg.place(l, 5)
		}
		minOf(b, func() { poly8(&pg, 5) })
	})
	b.Run("scalar-5blocks", func(b *testing.B) {
		var pk [32]byte
		var tag [TagSize]byte
		msg := make([]byte, 64)
		minOf(b, func() { aeadTag(&tag, &pk, nil, msg) })
	})
}
