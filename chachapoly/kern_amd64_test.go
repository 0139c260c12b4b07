//go:build !purego

package chachapoly

import (
	"encoding/binary"
	"math/big"
	"math/rand/v2"
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
	b.Run("chacha16-x2", func(b *testing.B) {
		// One block of two groups: one pass of two interleaved states.
		var g, g2 group
		minOf(b, func() { chacha16x2(&g, &g2) })
	})
	b.Run("chacha16-pair", func(b *testing.B) {
		// Two blocks of 16 lanes: one pass of two interleaved states.
		var g group
		minOf(b, func() { chacha16(&g, 2) })
	})
	b.Run("chacha16-keys", func(b *testing.B) {
		// 16 lanes of as many Keys (a pass of a burst to 16 peers).
		keys := make([]Key, lanes)
		var g group
		for l := range lanes {
			keys[l].w[0] = uint32(l)
			g.keyOf[l] = &keys[l]
		}
		minOf(b, func() { chachaKeys16(&g) })
	})
	b.Run("chacha8-block", func(b *testing.B) {
		var g group
		minOf(b, func() { chacha8(&g, 1) })
	})
	b.Run("poly16-block", func(b *testing.B) {
		var pg polyGroup
		var keys [maxChunk][32]byte
		for l := range lanes {
			pg.load(l, uint8(l), nil)
		}
		polyKeys16(&pg, &keys)
		minOf(b, func() { poly16(&pg, 1, 0) })
	})
	b.Run("poly16-keys", func(b *testing.B) {
		var pg polyGroup
		var keys [maxChunk][32]byte
		for l := range lanes {
			pg.load(l, uint8(l), nil)
		}
		minOf(b, func() { polyKeys16(&pg, &keys) })
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

// finishCases are accumulator values at the edges of the final reduction
// (RFC 8439 §2.5.1: h mod p, p = 2^130 - 5), and random ones.
func finishCases() []*big.Int {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	var hs []*big.Int
	for _, d := range []int64{-6, -5, -1, 0, 1, 4, 5, 6} {
		hs = append(hs, new(big.Int).Add(p, big.NewInt(d)))
	}
	two130 := new(big.Int).Lsh(big.NewInt(1), 130)
	hs = append(hs, big.NewInt(0), big.NewInt(1), new(big.Int).Sub(two130, big.NewInt(1)))
	rng := rand.New(rand.NewPCG(21, 22))
	for range 40 {
		h := new(big.Int).SetUint64(rng.Uint64())
		h.Lsh(h, 64).Or(h, new(big.Int).SetUint64(rng.Uint64()))
		h.Lsh(h, 2).Or(h, big.NewInt(int64(rng.IntN(4))))
		hs = append(hs, h)
	}
	return hs
}

// wantTag is (h mod p + s) mod 2^128, little-endian.
func wantTag(h *big.Int, s0, s1 uint64) [TagSize]byte {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	s := new(big.Int).Lsh(new(big.Int).SetUint64(s1), 64)
	s.Or(s, new(big.Int).SetUint64(s0))
	t := new(big.Int).Mod(h, p)
	t.Add(t, s)
	t.And(t, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1)))
	var out [TagSize]byte
	b := t.FillBytes(make([]byte, TagSize))
	for i := range out {
		out[i] = b[TagSize-1-i]
	}
	return out
}

// limbs splits h into limbs of the given widths (the last takes the rest).
func limbs(h *big.Int, widths ...uint) []uint64 {
	x := new(big.Int).Set(h)
	out := make([]uint64, len(widths))
	for i, w := range widths {
		if i == len(widths)-1 {
			out[i] = x.Uint64()
			break
		}
		m := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), w), big.NewInt(1))
		out[i] = new(big.Int).And(x, m).Uint64()
		x.Rsh(x, w)
	}
	return out
}

// TestPolyFinish checks the end of the vector Poly1305s (poly16's
// in-kernel finish, poly8Group.tag) at the edges of the reduction modulo
// p: accumulators just below, at and above p and 2^130, with addends that
// carry between the tag's halves.
func TestPolyFinish(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, h := range finishCases() {
		s0, s1 := rng.Uint64(), rng.Uint64()
		if rng.IntN(2) == 0 {
			s0 = ^uint64(0) // carries into the high half
		}
		want := wantTag(h, s0, s1)
		if hasIFMA {
			var pg polyGroup
			l := rng.IntN(lanes)
			for k, v := range limbs(h, 44, 44, 42) {
				pg.h[k][l] = v
			}
			pg.add[0][l], pg.add[1][l] = s0, s1
			poly16(&pg, 0, 0)
			var got [TagSize]byte
			pg.tag(l, &got)
			if got != want {
				t.Errorf("poly16 finish of h=%x: got %x, want %x", h, got, want)
			}
		}
		var pg8 poly8Group
		l := rng.IntN(poly8Lanes)
		for k, v := range limbs(h, 26, 26, 26, 26, 26) {
			pg8.h[k][l] = v
		}
		var pk [32]byte
		binary.LittleEndian.PutUint64(pk[16:], s0)
		binary.LittleEndian.PutUint64(pk[24:], s1)
		var got [TagSize]byte
		pg8.tag(l, &pk, &got)
		if got != want {
			t.Errorf("poly8 tag of h=%x: got %x, want %x", h, got, want)
		}
	}
}

// TestPolyKeys16 checks polyKeys16 against the scalar set-up of a key
// (RFC 8439 §2.5: r clamped, in 44/44/42-bit limbs; 20·r1, 20·r2; s the
// addend; a zero accumulator), for random keys at random indexes, with
// lanes sharing a key and idle lanes, which must hold no key at all (not
// index 0's: every value 0).
func TestPolyKeys16(t *testing.T) {
	if !hasIFMA {
		t.Skip("needs AVX-512 IFMA") // covered where CI's CPU has it
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for range 50 {
		var keys [maxChunk][32]byte
		for i := range keys {
			for b := range keys[i] {
				keys[i][b] = byte(rng.Uint32())
			}
		}
		var pg polyGroup
		for k := range pg.h {
			for l := range lanes {
				pg.h[k][l] = rng.Uint64() // must be zeroed
			}
		}
		for l := range lanes { // as a previous chunk may leave them
			pg.r[0][l], pg.s[0][l], pg.add[0][l] = rng.Uint64(), rng.Uint64(), rng.Uint64()
		}
		for l := range lanes {
			if rng.IntN(4) == 0 {
				pg.idle(l)
				continue
			}
			pg.load(l, uint8(rng.IntN(maxChunk)), make([]byte, rng.IntN(100)))
		}
		polyKeys16(&pg, &keys)
		for l := range lanes {
			if pg.total[l] == 0 {
				got := [10]uint64{pg.r[0][l], pg.r[1][l], pg.r[2][l], pg.s[0][l], pg.s[1][l],
					pg.add[0][l], pg.add[1][l], pg.h[0][l], pg.h[1][l], pg.h[2][l]}
				if got != [10]uint64{} {
					t.Fatalf("idle lane %d: r, s, add, h = %x, want all 0", l, got)
				}
				continue
			}
			pk := &keys[pg.keyIdx[l]]
			r0 := binary.LittleEndian.Uint64(pk[0:]) & rMask0
			r1 := binary.LittleEndian.Uint64(pk[8:]) & rMask1
			l1, l2 := (r0>>44|r1<<20)&mask44, r1>>24
			want := [10]uint64{r0 & mask44, l1, l2, 20 * l1, 20 * l2,
				binary.LittleEndian.Uint64(pk[16:]), binary.LittleEndian.Uint64(pk[24:]), 0, 0, 0}
			got := [10]uint64{pg.r[0][l], pg.r[1][l], pg.r[2][l], pg.s[0][l], pg.s[1][l],
				pg.add[0][l], pg.add[1][l], pg.h[0][l], pg.h[1][l], pg.h[2][l]}
			if got != want {
				t.Fatalf("lane %d (key %d): r, s, add, h = %x, want %x", l, pg.keyIdx[l], got, want)
			}
		}
	}
}

// TestChachaKeys16 checks chachaKeys16 against the transpose it replaces:
// word w of lane l's Key into key[w][l] for every lane with a Key (16
// Keys in a random order, one a lane, as a burst to 16 peers has; lanes
// sharing a Key), and zero rows for a lane without one (nil).
func TestChachaKeys16(t *testing.T) {
	if !hasAVX512 {
		t.Skip("needs AVX-512") // covered where CI's CPU has it
	}
	rng := rand.New(rand.NewPCG(33, 34))
	keys := make([]Key, lanes)
	for round := range 100 {
		for i := range keys {
			var b [KeySize]byte
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			keys[i].Set(&b)
		}
		var g group
		for w := range g.key {
			for l := range lanes {
				g.key[w][l] = rng.Uint32() // rows left from an earlier pass
			}
		}
		perm := rng.Perm(lanes)
		for l := range lanes {
			switch {
			case round%2 == 0:
				g.keyOf[l] = &keys[perm[l]]
			case rng.IntN(5) > 0:
				g.keyOf[l] = &keys[rng.IntN(5)]
			}
		}
		chachaKeys16(&g)
		for l := range lanes {
			if g.keyOf[l] == nil {
				for w := range 8 {
					if got := g.key[w][l]; got != 0 {
						t.Fatalf("lane %d without a Key, word %d: %#x, want 0", l, w, got)
					}
				}
				continue
			}
			for w := range 8 {
				if got, want := g.key[w][l], g.keyOf[l].w[w]; got != want {
					t.Fatalf("lane %d word %d: %#x, want %#x", l, w, got, want)
				}
			}
		}
	}
}

// TestPoly8IdleHoldsNoKey checks that a poly8 lane made idle keeps
// nothing of the one-time key it was loaded with before (a packet of an
// earlier chunk of the same call): r and s are 0 as well as h.
func TestPoly8IdleHoldsNoKey(t *testing.T) {
	var pg poly8Group
	var pk [32]byte
	for i := range pk {
		pk[i] = byte(0xa5 ^ i)
	}
	for l := range poly8Lanes {
		pg.load(l, &pk, make([]byte, 40))
		pg.idle(l)
		for k := range pg.r {
			if pg.r[k][l] != 0 {
				t.Fatalf("lane %d: r[%d] = %#x after idle, want 0", l, k, pg.r[k][l])
			}
		}
		for k := range pg.s {
			if pg.s[k][l] != 0 {
				t.Fatalf("lane %d: s[%d] = %#x after idle, want 0", l, k, pg.s[k][l])
			}
		}
	}
}
