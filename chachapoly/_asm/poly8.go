package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Offsets of the fields of chachapoly.poly8Group (8 lanes, two halves of 4
// 64-bit lanes); TestPoly8GroupLayout checks them.
const (
	off8R       = 0    // [5][8]uint64 r in 26-bit limbs
	off8S       = 320  // [4][8]uint64 5·r1 .. 5·r4
	off8H       = 576  // [5][8]uint64 accumulator limbs
	off8Msg     = 896  // [8]unsafe.Pointer message (ciphertext) start
	off8Start   = 960  // [8]uint64 step at which the lane absorbs its first block
	off8FullEnd = 1024 // [8]uint64 start + full 16-byte blocks read from the message
	off8TailRel = 1088 // [8]uint64 offset in the group of the tail blocks, less 16·fullEnd
)

// poly8 emits the AVX2 Poly1305 kernel: 8 lanes in two halves of four
// 64-bit lanes (YMM), numbers in five limbs of 26 bits, products by
// VPMULUDQ (32×32→64 bits). Lanes are right-aligned: lane l absorbs its
// blocks at steps start[l] .. blocks-1, and before that adds nothing with a
// zero accumulator ((0 + 0)·r = 0), so that no lane needs a mask on its
// accumulator and lanes of different lengths finish together.
func poly8() {
	splat := func(name string, v uint64) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for k := 0; k < 4; k++ {
			DATA(8*k, U64(v))
		}
		return m
	}
	m26 := splat("poly8_mask26", 1<<26-1)
	bit24 := splat("poly8_bit24", 1<<24)
	minus1 := splat("poly8_minus1", 0xffffffffffffffff)
	one := splat("poly8_one", 1)

	TEXT("poly8", NOSPLIT, "func(lanes *byte, blocks uint64)")
	Doc("poly8 runs steps 0..blocks-1 of the Poly1305 accumulators of the",
		"8 lanes of lanes (a poly8Group): at step i, lane l absorbs its block",
		"i-start[l] when i >= start[l], read from msg while it is below full",
		"and from the lane's tail blocks after that. It requires AVX2.")
	gv := AllocLocal(32) // the group's address in every 64-bit lane
	g, n, i, zero := GP64(), GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	Load(Param("blocks"), n)
	XORQ(i, i)
	XORQ(zero, zero)
	MOVQ(g, gv)
	VPBROADCASTQ(gv.Offset(0), Y14)
	VMOVDQU(Y14, gv)

	I, I16 := Y15, Y14 // step i in every lane; 16i + the group's address
	VPXOR(I, I, I)
	Label("p8_block")
	CMPQ(i, n)
	JAE(LabelRef("p8_done"))
	VPSLLQ(U8(4), I, I16)
	VPADDQ(gv, I16, I16)
	for half := 0; half < 2; half++ {
		at := func(off int) Mem { return Mem{Base: g, Disp: off + 32*half} }
		// Lanes absorbing at this step (K: j = i-start >= 0), and those
		// reading the message (i < fullEnd); block address msg + 16j or
		// the group + tailRel + 16i.
		J, K, F, tail := Y0, Y1, Y2, Y3
		VMOVDQU(at(off8Start), J)
		VPSUBQ(J, I, J)
		VPCMPGTQ(minus1, J, K)
		VMOVDQU(at(off8FullEnd), F)
		VPCMPGTQ(I, F, F)
		VPSLLQ(U8(4), J, J)
		VPADDQ(at(off8Msg), J, J)
		VPADDQ(at(off8TailRel), I16, tail)
		VPBLENDVB(F, J, tail, tail)
		lo, hi := Y4, Y5
		VMOVDQA(K, F)
		VPXOR(lo, lo, lo)
		VPGATHERQQ(F, Mem{Base: zero, Index: tail, Scale: 1}, lo)
		VMOVDQA(K, F)
		VPXOR(hi, hi, hi)
		VPGATHERQQ(F, Mem{Base: zero, Index: tail, Scale: 1, Disp: 8}, hi)

		// a = h + m, m in 26-bit limbs with the 2^128 bit set in lanes
		// absorbing (every block of the AEAD's MAC input is a full one,
		// RFC 8439 §2.8).
		a := []VecPhysical{Y6, Y7, Y8, Y9, Y10}
		hk := func(k int) Mem { return at(off8H + 64*k) }
		VPAND(m26, lo, a[0])
		VPADDQ(hk(0), a[0], a[0])
		VPSRLQ(U8(26), lo, a[1])
		VPAND(m26, a[1], a[1])
		VPADDQ(hk(1), a[1], a[1])
		VPSRLQ(U8(52), lo, a[2])
		VPSLLQ(U8(12), hi, lo)
		VPOR(lo, a[2], a[2])
		VPAND(m26, a[2], a[2])
		VPADDQ(hk(2), a[2], a[2])
		VPSRLQ(U8(14), hi, a[3])
		VPAND(m26, a[3], a[3])
		VPADDQ(hk(3), a[3], a[3])
		VPSRLQ(U8(40), hi, a[4])
		VPAND(bit24, K, lo)
		VPOR(lo, a[4], a[4])
		VPADDQ(hk(4), a[4], a[4])

		// d = a·r mod p, column k = sum of a_i·r_(k-i), with
		// r_(k-i+5)·2^130 ≡ 5·r_(k-i) for i > k (2^130 ≡ 5 mod p).
		d := []VecPhysical{Y11, Y12, Y13, Y0, Y1}
		t := Y2
		coef := func(k, i int) Mem {
			if i <= k {
				return at(off8R + 64*(k-i))
			}
			return at(off8S + 64*(k-i+5-1))
		}
		for k := 0; k < 5; k++ {
			VPMULUDQ(coef(k, 0), a[0], d[k])
			for i := 1; i < 5; i++ {
				VPMULUDQ(coef(k, i), a[i], t)
				VPADDQ(t, d[k], d[k])
			}
		}
		// Carry through the limbs, fold the top back times 5, and carry
		// once more into limb 1: limbs below 2^26 (limb 1 below 2^27).
		for k := 0; k < 4; k++ {
			VPSRLQ(U8(26), d[k], t)
			VPAND(m26, d[k], d[k])
			VPADDQ(t, d[k+1], d[k+1])
		}
		VPSRLQ(U8(26), d[4], t)
		VPAND(m26, d[4], d[4])
		VPADDQ(t, d[0], d[0])
		VPSLLQ(U8(2), t, t)
		VPADDQ(t, d[0], d[0])
		VPSRLQ(U8(26), d[0], t)
		VPAND(m26, d[0], d[0])
		VPADDQ(t, d[1], d[1])
		for k := 0; k < 5; k++ {
			VMOVDQU(d[k], hk(k))
		}
	}
	VPADDQ(one, I, I)
	INCQ(i)
	JMP(LabelRef("p8_block"))

	Label("p8_done")
	// Leave no accumulator, key or message in vector registers.
	VZEROALL()
	RET()
}
