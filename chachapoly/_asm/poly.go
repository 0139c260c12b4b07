package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Offsets of the fields of chachapoly.polyGroup (16 lanes, two halves of 8
// 64-bit lanes); TestPolyGroupLayout checks them.
const (
	offR     = 0    // [3][16]uint64 r in 44/44/42-bit limbs
	offS     = 384  // [2][16]uint64 20·r1, 20·r2
	offH     = 640  // [3][16]uint64 accumulator limbs
	offMsg   = 1024 // [16]unsafe.Pointer message (ciphertext) start
	offFull  = 1152 // [16]uint64 full 16-byte blocks read from the message
	offTotal = 1280 // [16]uint64 blocks in all (message, padded tail, lengths)
	offTailO = 1408 // [16]uint64 offset of each lane's tail blocks in the group
	offAdd   = 2048 // [2][16]uint64 the final addend s (RFC 8439 §2.5), low and high 64 bits
	offOut   = 2304 // [2][16]uint64 the tags, low and high 64 bits
	offKeyI  = 2560 // [16]uint64 index of each lane's one-time key in the keys array
)

// Poly1305's clamp of r (RFC 8439 §2.5): the two 64-bit halves' masks.
const (
	rMask0 = 0x0ffffffc0fffffff
	rMask1 = 0x0ffffffc0ffffffc
)

// polyKeys16 emits the set-up of the 16 lanes' keys: each lane's one-time
// key (r ‖ s, 32 bytes, RFC 8439 §2.6) loaded from the keys array by its
// index, r clamped and split into limbs, 20·r1 and 20·r2, s as the
// addend, and the accumulator zeroed: the work that was 16 scalar lane
// set-ups in Go, in 16 loads, a transpose (12 permutes) and a few vector
// operations (8 gathers before, slower on an AMD Zen 5).
func polyKeys16() {
	TEXT("polyKeys16", NOSPLIT, "func(lanes *byte, keys *byte)")
	Doc("polyKeys16 sets up the key of each of the 16 lanes of lanes (a",
		"polyGroup) from keys[keyIdx[l]] (keys an array of 32-byte one-time",
		"keys): r clamped in limbs, 20·r1, 20·r2, the addend s, and a zero",
		"accumulator; all of them 0 in an idle lane (total 0). It requires",
		"AVX-512 F.")
	g, k, tmp := GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	Load(Param("keys"), k)
	m0, m1, mask44, zero := Z31, Z30, Z29, Z28
	MOVQ(U64(rMask0), tmp)
	VPBROADCASTQ(tmp, m0)
	MOVQ(U64(rMask1), tmp)
	VPBROADCASTQ(tmp, m1)
	MOVQ(U64(1<<44-1), tmp)
	VPBROADCASTQ(tmp, mask44)
	VPXORQ(zero, zero, zero)
	// Index vectors of the transpose below (VPERMT2Q): the first round
	// takes two lanes' keys from each of two registers and keeps words
	// 0-1 (pairLo) or 2-3 (pairHi) of the four lanes; the second, from
	// two such registers, one word of all eight (evens, odds).
	qwords := func(name string, idx ...int) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for q, v := range idx {
			DATA(8*q, U64(uint64(v)))
		}
		return m
	}
	pairLo := qwords("polyKeys16_pairLo", 0, 1, 4, 5, 8, 9, 12, 13)
	pairHi := qwords("polyKeys16_pairHi", 2, 3, 6, 7, 10, 11, 14, 15)
	evens := qwords("polyKeys16_evens", 0, 2, 4, 6, 8, 10, 12, 14)
	odds := qwords("polyKeys16_odds", 1, 3, 5, 7, 9, 11, 13, 15)
	for half := 0; half < 2; half++ {
		at := func(off int) Mem { return Mem{Base: g, Disp: off + 64*half} }
		// Each lane's 32-byte key (r ‖ s) by one load, two lanes a
		// register: A holds lanes 0-1 of the half, B 2-3, C 4-5, D 6-7.
		regs := []VecPhysical{Z10, Z11, Z12, Z13}
		for q := 0; q < 8; q++ {
			MOVQ(Mem{Base: g, Disp: offKeyI + 8*(8*half+q)}, tmp)
			SHLQ(U8(5), tmp)
			if r := regs[q/2]; q%2 == 0 {
				VMOVDQU64(Mem{Base: k, Index: tmp, Scale: 1}, r.AsY())
			} else {
				VINSERTI64X4(U8(1), Mem{Base: k, Index: tmp, Scale: 1}, r, r)
			}
		}
		// Lanes 0-3 and 4-7, words 0-1 and 2-3 each; then the rows.
		lo03, hi03, lo47, hi47 := Z14, Z15, Z16, Z17
		for _, m := range []struct {
			a, b, out VecPhysical
			idx       Mem
		}{
			{Z10, Z11, lo03, pairLo}, {Z10, Z11, hi03, pairHi},
			{Z12, Z13, lo47, pairLo}, {Z12, Z13, hi47, pairHi},
		} {
			VMOVDQU64(m.idx, Z18)
			VMOVDQA64(m.a, m.out)
			VPERMT2Q(m.b, Z18, m.out)
		}
		words := []VecPhysical{Z1, Z2, Z3, Z4} // r low, r high, s low, s high
		for w, v := range words {
			src, idx := lo03, evens
			if w >= 2 {
				src = hi03
			}
			if w%2 == 1 {
				idx = odds
			}
			VMOVDQU64(idx, Z18)
			VMOVDQA64(src, v)
			if w >= 2 {
				VPERMT2Q(hi47, Z18, v)
			} else {
				VPERMT2Q(lo47, Z18, v)
			}
		}
		// Only lanes in use (0 < total) keep their key: an idle lane
		// (key index 0, read above) gets r = s = 0 and never holds
		// another lane's one-time key.
		VPCMPUQ(U8(1), at(offTotal), zero, K2)
		for _, v := range words {
			VMOVDQA64_Z(v, K2, v)
		}
		r0, r1 := words[0], words[1]
		VPANDQ(m0, r0, r0)
		VPANDQ(m1, r1, r1)
		l0, l1, l2, t, u := Z5, Z6, Z7, Z8, Z9
		VPANDQ(mask44, r0, l0)
		VPSRLQ(U8(44), r0, l1)
		VPSLLQ(U8(20), r1, t)
		VPORQ(t, l1, l1)
		VPANDQ(mask44, l1, l1)
		VPSRLQ(U8(24), r1, l2)
		VMOVDQU64(l0, at(offR))
		VMOVDQU64(l1, at(offR+128))
		VMOVDQU64(l2, at(offR+256))
		// 20·l = 16·l + 4·l (2^132 ≡ 20 mod p, as poly16 uses it).
		for i, l := range []VecPhysical{l1, l2} {
			VPSLLQ(U8(4), l, t)
			VPSLLQ(U8(2), l, u)
			VPADDQ(u, t, t)
			VMOVDQU64(t, at(offS+128*i))
		}
		VMOVDQU64(words[2], at(offAdd))
		VMOVDQU64(words[3], at(offAdd+128))
		for i := 0; i < 3; i++ {
			VMOVDQU64(zero, at(offH+128*i))
		}
	}
	// Leave no key in vector registers.
	VZEROALL()
	for i := 16; i < 32; i++ {
		VPXORQ(zmm[i], zmm[i], zmm[i])
	}
	RET()
}

// poly16 emits the 16-lane Poly1305 kernel: for every lane, absorb blocks
// 0..total-1, block i read from msg+16i while i < full and from the lane's
// tail blocks after that, then finish the tag (h mod p, plus s, mod 2^128).
// Arithmetic modulo 2^130-5 in three limbs of 44, 44 and 42 bits, products
// by the 52-bit multiply-adds of AVX-512 IFMA.
//
// The first fast blocks, which every lane in use reads from its message,
// take a shorter step: plain loads at the lanes' addresses plus 16i (no
// choice of message or tail, no compare), and the accumulators are replaced
// whole (a lane not in use reads a lane in use's message; what its
// accumulator holds is never read).
func poly16() {
	TEXT("poly16", NOSPLIT, "func(lanes *byte, blocks uint64, fast uint64)")
	Doc("poly16 absorbs up to blocks 16-byte blocks into the Poly1305",
		"accumulators of the 16 lanes of lanes (a polyGroup) and writes each",
		"lane's tag (accumulator mod 2^130-5, plus the addend, mod 2^128) to",
		"its out words. Every lane's msg, in use or not, must have fast or",
		"more full blocks (fast <= blocks). It requires AVX-512 F and IFMA.")
	g, n, i, zero, tmp, nf := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	Load(Param("blocks"), n)
	Load(Param("fast"), nf)
	XORQ(i, i)
	XORQ(zero, zero)

	mask44, mask42, bit40, base := Z31, Z30, Z29, Z28
	MOVQ(U64(1<<44-1), tmp)
	VPBROADCASTQ(tmp, mask44)
	MOVQ(U64(1<<42-1), tmp)
	VPBROADCASTQ(tmp, mask42)
	MOVQ(U64(1<<40), tmp)
	VPBROADCASTQ(tmp, bit40)
	VPBROADCASTQ(g, base)

	// h limbs of half 0 in Z0..Z2, of half 1 in Z3..Z5.
	h := [2][3]VecPhysical{{Z0, Z1, Z2}, {Z3, Z4, Z5}}
	for half := 0; half < 2; half++ {
		for k := 0; k < 3; k++ {
			VMOVDQU64(Mem{Base: g, Disp: offH + 128*k + 64*half}, h[half][k])
		}
	}
	I := Z27
	// The fast steps, both halves a step (their two chains of
	// multiplications overlap): lane l's block at msg[l] + off (off =
	// 16i, the same for every lane), a 16-byte load each, four lanes a
	// register, then the two registers of a half permuted into the
	// blocks' low and high 64 bits (VPERMT2Q by idxLo and idxHi). Every
	// lane's msg is a message with fast full blocks at least: mac16
	// points an idle lane at a lane in use's (what an idle lane's
	// accumulator takes is never read). Two gathers a half took longer
	// on an AMD Zen 5 (BenchmarkBurst/avx512ifma at 1,420 bytes: seal
	// 361-368 ns a packet against 340, open 363-368 against 318-320);
	// a loop a half, with its addresses and r in registers, serialised
	// the chains (open 351-354).
	idxLo, idxHi := Z19, Z20
	lanesLo := GLOBL("poly16_lanesLo", RODATA|NOPTR) // 0, 2, ..., 14
	for q := 0; q < 8; q++ {
		DATA(8*q, U64(2*q))
	}
	lanesHi := GLOBL("poly16_lanesHi", RODATA|NOPTR) // 1, 3, ..., 15
	for q := 0; q < 8; q++ {
		DATA(8*q, U64(2*q+1))
	}
	off, p := GP64(), GP64()
	XORQ(off, off)
	VMOVDQU64(lanesLo, idxLo)
	VMOVDQU64(lanesHi, idxHi)
	Label("poly_fast")
	CMPQ(i, nf)
	JAE(LabelRef("poly_block"))
	for half := 0; half < 2; half++ {
		lo, hi := Z6, Z7
		ra, rb := Z21, Z22
		for q := 0; q < 8; q++ {
			MOVQ(Mem{Base: g, Disp: offMsg + 8*(8*half+q)}, p)
			r := ra
			if q >= 4 {
				r = rb
			}
			if q%4 == 0 {
				VMOVDQU64(Mem{Base: p, Index: off, Scale: 1}, r.AsX())
			} else {
				VINSERTI32X4(U8(q%4), Mem{Base: p, Index: off, Scale: 1}, r, r)
			}
		}
		VMOVDQA64(ra, lo)
		VPERMT2Q(rb, idxLo, lo)
		VMOVDQA64(ra, hi)
		VPERMT2Q(rb, idxHi, hi)
		polyMul(g, half, h[half], lo, hi, mask44, mask42, bit40, nil)
	}
	ADDQ(U8(16), off)
	INCQ(i)
	JMP(LabelRef("poly_fast"))

	Label("poly_block")
	CMPQ(i, n)
	JAE(LabelRef("poly_done"))
	VPBROADCASTQ(i, I)
	for half := 0; half < 2; half++ {
		at := func(off int) Mem { return Mem{Base: g, Disp: off + 64*half} }
		lo, hi, addr, t := Z6, Z7, Z8, Z9
		// Lanes still absorbing (K2), and those reading the message (K1).
		VPCMPUQ(U8(1), at(offFull), I, K1)  // i < full
		VPCMPUQ(U8(1), at(offTotal), I, K2) // i < total
		// Tail address: base + tailOff + 16(i-full); message address:
		// msg + 16i, chosen where K1.
		VPSUBQ(at(offFull), I, addr)
		VPSLLQ(U8(4), addr, addr)
		VPADDQ(at(offTailO), addr, addr)
		VPADDQ(base, addr, addr)
		VPSLLQ(U8(4), I, t)
		VPADDQ(at(offMsg), t, t)
		VMOVDQA64(t, K1, addr)
		KMOVW(K2, K3)
		VPGATHERQQ(Mem{Base: zero, Index: addr, Scale: 1}, K3, lo)
		KMOVW(K2, K3)
		VPGATHERQQ(Mem{Base: zero, Index: addr, Scale: 1, Disp: 8}, K3, hi)
		// h changes only in lanes still absorbing.
		polyMul(g, half, h[half], lo, hi, mask44, mask42, bit40, K2)
	}
	INCQ(i)
	JMP(LabelRef("poly_block"))

	Label("poly_done")
	for half := 0; half < 2; half++ {
		for k := 0; k < 3; k++ {
			VMOVDQU64(h[half][k], Mem{Base: g, Disp: offH + 128*k + 64*half})
		}
	}
	five, one := Z26, Z25
	MOVQ(U64(5), tmp)
	VPBROADCASTQ(tmp, five)
	MOVQ(U64(1), tmp)
	VPBROADCASTQ(tmp, one)
	for half := 0; half < 2; half++ {
		polyFinish(g, h[half], half, mask44, mask42, five, one)
	}
	// Leave no accumulator, key or tag in vector registers.
	VZEROALL()
	for i := 16; i < 32; i++ {
		VPXORQ(zmm[i], zmm[i], zmm[i])
	}
	RET()
}

// polyMul emits one block of one half of poly16: hh = (hh + m)·r mod
// 2^130-5 (partially reduced), m the block whose low and high 64 bits are
// in lo and hi (both clobbered), with the 2^128 bit set; where keep is
// not nil, only in the lanes it selects.
func polyMul(g Register, half int, hh [3]VecPhysical, lo, hi, mask44, mask42, bit40 VecPhysical, keep Op) {
	at := func(off int) Mem { return Mem{Base: g, Disp: off + 64*half} }
	t := Z9
	L0, L1, L2, H0, H1, H2 := Z10, Z11, Z12, Z13, Z14, Z15
	// a = h + m, m in limbs with the 2^128 bit set.
	a := []VecPhysical{Z16, Z17, Z18}
	VPANDQ(mask44, lo, t)
	VPADDQ(t, hh[0], a[0])
	VPSRLQ(U8(44), lo, t)
	VPSLLQ(U8(20), hi, lo)
	VPORQ(lo, t, t)
	VPANDQ(mask44, t, t)
	VPADDQ(t, hh[1], a[1])
	VPSRLQ(U8(24), hi, t)
	VPORQ(bit40, t, t)
	VPADDQ(t, hh[2], a[2])

	// Products: column k holds L_k + 2^52·H_k at weight 2^(44k);
	// 2^132 ≡ 20 (mod p) gives s1 = 20·r1, s2 = 20·r2.
	r0, r1, r2 := at(offR), at(offR+128), at(offR+256)
	s1, s2 := at(offS), at(offS+128)
	for _, z := range []VecPhysical{L0, L1, L2, H0, H1, H2} {
		VPXORQ(z, z, z)
	}
	terms := [3][3]struct {
		h int
		m Mem
	}{
		{{0, r0}, {1, s2}, {2, s1}},
		{{0, r1}, {1, r0}, {2, s2}},
		{{0, r2}, {1, r1}, {2, r0}},
	}
	L := []VecPhysical{L0, L1, L2}
	H := []VecPhysical{H0, H1, H2}
	for k := 0; k < 3; k++ {
		for _, tm := range terms[k] {
			VPMADD52LUQ(tm.m, a[tm.h], L[k])
			VPMADD52HUQ(tm.m, a[tm.h], H[k])
		}
	}
	// High halves move one column up, times 2^8 (2^52 = 2^44·2^8).
	VPSLLQ(U8(8), H0, H0)
	VPADDQ(H0, L1, L1)
	VPSLLQ(U8(8), H1, H1)
	VPADDQ(H1, L2, L2)
	// Carry, and fold everything at or above 2^130 back times 5:
	// c = L2>>42 + 4·(H2<<8) (H2<<8 is at weight 2^132).
	VPSRLQ(U8(44), L0, t)
	VPANDQ(mask44, L0, L0)
	VPADDQ(t, L1, L1)
	VPSRLQ(U8(44), L1, t)
	VPANDQ(mask44, L1, L1)
	VPADDQ(t, L2, L2)
	VPSRLQ(U8(42), L2, t)
	VPANDQ(mask42, L2, L2)
	VPSLLQ(U8(10), H2, H2)
	VPADDQ(H2, t, t)
	VPADDQ(t, L0, L0)
	VPSLLQ(U8(2), t, t)
	VPADDQ(t, L0, L0)
	VPSRLQ(U8(44), L0, t)
	VPANDQ(mask44, L0, L0)
	VPADDQ(t, L1, L1)
	if keep == nil {
		VMOVDQA64(L0, hh[0])
		VMOVDQA64(L1, hh[1])
		VMOVDQA64(L2, hh[2])
		return
	}
	VMOVDQA64(L0, keep, hh[0])
	VMOVDQA64(L1, keep, hh[1])
	VMOVDQA64(L2, keep, hh[2])
}

// polyFinish emits the end of a Poly1305 computation for one half (8
// lanes) of poly16, h its accumulator limbs: carry fully, subtract p where
// h >= p (chosen by a mask, no branch), add the addend s modulo 2^128 and
// store the 128-bit tags to the group's out words (RFC 8439 §2.5.1).
func polyFinish(g Register, h [3]VecPhysical, half int, mask44, mask42, five, one VecPhysical) {
	at := func(off int) Mem { return Mem{Base: g, Disp: off + 64*half} }
	t, g0, g1, g2, lo, hi, s := Z6, Z7, Z8, Z9, Z10, Z11, Z12
	// Carry: every limb to its width, the top back times 5 (2^130 ≡ 5).
	VPSRLQ(U8(44), h[0], t)
	VPANDQ(mask44, h[0], h[0])
	VPADDQ(t, h[1], h[1])
	VPSRLQ(U8(44), h[1], t)
	VPANDQ(mask44, h[1], h[1])
	VPADDQ(t, h[2], h[2])
	VPSRLQ(U8(42), h[2], t)
	VPANDQ(mask42, h[2], h[2])
	VPADDQ(t, h[0], h[0])
	VPSLLQ(U8(2), t, t)
	VPADDQ(t, h[0], h[0])
	VPSRLQ(U8(44), h[0], t)
	VPANDQ(mask44, h[0], h[0])
	VPADDQ(t, h[1], h[1])
	VPSRLQ(U8(44), h[1], t)
	VPANDQ(mask44, h[1], h[1])
	VPADDQ(t, h[2], h[2])
	// g = h + 5; where g reaches 2^130 (bit 42 of its top limb), h >= p
	// and h mod p = g - 2^130.
	VPADDQ(five, h[0], g0)
	VPSRLQ(U8(44), g0, t)
	VPANDQ(mask44, g0, g0)
	VPADDQ(t, h[1], g1)
	VPSRLQ(U8(44), g1, t)
	VPANDQ(mask44, g1, g1)
	VPADDQ(t, h[2], g2)
	VPSRLQ(U8(42), g2, t)
	VPTESTMQ(t, t, K1)
	VMOVDQA64(g0, K1, h[0])
	VMOVDQA64(g1, K1, h[1])
	VMOVDQA64(g2, K1, h[2])
	// The low 128 bits, plus s with the carry between its halves.
	VPSLLQ(U8(44), h[1], lo)
	VPORQ(h[0], lo, lo)
	VPSRLQ(U8(20), h[1], hi)
	VPSLLQ(U8(24), h[2], t)
	VPORQ(t, hi, hi)
	VMOVDQU64(at(offAdd), s)
	VPADDQ(s, lo, lo)
	VPCMPUQ(U8(1), s, lo, K1) // lo < s: the addition carried
	VPADDQ(at(offAdd+128), hi, hi)
	VPADDQ(one, hi, K1, hi)
	VMOVDQU64(lo, at(offOut))
	VMOVDQU64(hi, at(offOut+128))
}
