//go:build !purego

package chachapoly

import "testing"

// BenchmarkKernels measures one 16-lane iteration of each assembly kernel
// (per call: one ChaCha20 block in 16 lanes; one Poly1305 block in 16 lanes).
func BenchmarkKernels(b *testing.B) {
	if detect() < implAVX512IFMA {
		b.Skip("needs AVX-512 IFMA")
	}
	b.Run("chacha16-block", func(b *testing.B) {
		var g group
		for b.Loop() {
			chacha16(&g, 1)
		}
	})
	b.Run("poly16-block", func(b *testing.B) {
		var pg polyGroup
		var pk [32]byte
		for l := range lanes {
			pg.load(l, &pk, nil)
		}
		for b.Loop() {
			poly16(&pg, 1)
		}
	})
}
