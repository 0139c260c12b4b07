package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var ymm = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}

func y(i int) VecPhysical { return ymm[i] }

// chacha8 emits the AVX2 kernel: the same job as chacha16 on lanes 0..7 of
// the group, with 16 YMM registers only: rotations by 16 and 8 are byte
// shuffles, by 12 and 7 shift pairs through one register whose word is
// parked on the stack meanwhile; message tails are XORed byte by byte.
func chacha8() {
	sig := GLOBL("chacha8_sigma", RODATA|NOPTR)
	for i, c := range sigma {
		for k := 0; k < 8; k++ {
			DATA(32*i+4*k, U32(c))
		}
	}
	// VPSHUFB masks rotating every 32-bit word left by 16 and by 8 bits.
	rot16 := GLOBL("chacha8_rot16", RODATA|NOPTR)
	for k := 0; k < 32; k += 4 {
		q := k % 16
		for b, from := range []int{2, 3, 0, 1} {
			DATA(k+b, U8(q+from))
		}
	}
	rot8 := GLOBL("chacha8_rot8", RODATA|NOPTR)
	for k := 0; k < 32; k += 4 {
		q := k % 16
		for b, from := range []int{3, 0, 1, 2} {
			DATA(k+b, U8(q+from))
		}
	}

	TEXT("chacha8", NOSPLIT, "func(lanes *byte, blocks uint64)")
	Doc("chacha8 is chacha16 for lanes 0..7 of lanes with AVX2 only.")
	park := AllocLocal(32)  // parked register during 12/7 rotations
	ctrv := AllocLocal(32)  // counter vector of this block
	rows := AllocLocal(256) // rows 8..15 while rows 0..7 are transposed
	ks := AllocLocal(32)    // key stream of a partial tail
	g, j, jn := GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	XORQ(j, j)
	Load(Param("blocks"), jn)
	off, tmp, rem, ptr, k := GP64(), GP64(), GP64(), GP64(), GP64()

	Label("c8_block")
	CMPQ(j, jn)
	JAE(LabelRef("c8_done"))
	MOVL(j.As32(), tmp.As32())
	MOVL(tmp.As32(), park)
	VPBROADCASTD(park, Y12)
	VPADDD(Mem{Base: g, Disp: offCtr}, Y12, Y12)
	VMOVDQU(Y12, ctrv)
	for i := 0; i < 4; i++ {
		VMOVDQU(sig.Offset(32*i), y(i))
	}
	for w := 0; w < 8; w++ {
		VMOVDQU(Mem{Base: g, Disp: offKey + 64*w}, y(4+w))
	}
	for w := 0; w < 3; w++ {
		VMOVDQU(Mem{Base: g, Disp: offNonce + 64*w}, y(13+w))
	}

	MOVL(U32(10), tmp.As32())
	Label("c8_rounds")
	round8 := func(qs [4][4]int) {
		rotShift := func(n int) {
			// Y12 (word 12, a d word) is parked while it serves as scratch.
			VMOVDQU(Y12, park)
			for _, q := range qs {
				VPSLLD(U8(n), y(q[1]), Y12)
				VPSRLD(U8(32-n), y(q[1]), y(q[1]))
				VPOR(Y12, y(q[1]), y(q[1]))
			}
			VMOVDQU(park, Y12)
		}
		// Half a quarter round (RFC 8439 §2.1) on four columns or
		// diagonals: a += b; d ^= a; d <<<= 16 (8), a byte shuffle by
		// rotD; c += d; b ^= c; b <<<= rotB (12, 7).
		half := func(rotD Op, rotB int) {
			for _, q := range qs {
				VPADDD(y(q[1]), y(q[0]), y(q[0]))
			}
			for _, q := range qs {
				VPXOR(y(q[0]), y(q[3]), y(q[3]))
			}
			for _, q := range qs {
				VPSHUFB(rotD, y(q[3]), y(q[3]))
			}
			for _, q := range qs {
				VPADDD(y(q[3]), y(q[2]), y(q[2]))
			}
			for _, q := range qs {
				VPXOR(y(q[2]), y(q[1]), y(q[1]))
			}
			rotShift(rotB)
		}
		half(rot16, 12)
		half(rot8, 7)
	}
	round8([4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}})
	round8([4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}})
	DECL(tmp.As32())
	JNZ(LabelRef("c8_rounds"))

	// Feed-forward.
	for i := 0; i < 4; i++ {
		VPADDD(sig.Offset(32*i), y(i), y(i))
	}
	for w := 0; w < 8; w++ {
		VPADDD(Mem{Base: g, Disp: offKey + 64*w}, y(4+w), y(4+w))
	}
	VPADDD(ctrv, Y12, Y12)
	for w := 0; w < 3; w++ {
		VPADDD(Mem{Base: g, Disp: offNonce + 64*w}, y(13+w), y(13+w))
	}
	for i := 8; i < 16; i++ {
		VMOVDQU(y(i), rows.Offset(32*(i-8)))
	}

	MOVQ(j, off)
	SHLQ(U8(6), off)
	for half := 0; half < 2; half++ {
		if half == 1 {
			for i := 0; i < 8; i++ {
				VMOVDQU(rows.Offset(32*i), y(i))
			}
		}
		// Rows 0..7 (or 8..15) in Y0..Y7 -> 32 bytes of each lane in Y8..Y15.
		t := []VecPhysical{Y8, Y9, Y10, Y11}
		for gi := 0; gi < 2; gi++ {
			transpose4([]VecPhysical{y(4 * gi), y(4*gi + 1), y(4*gi + 2), y(4*gi + 3)}, t)
		}
		for i := 0; i < 4; i++ {
			VPERM2I128(U8(0x20), y(4+i), y(i), y(8+i))
			VPERM2I128(U8(0x31), y(4+i), y(i), y(12+i))
		}
		// Lane l's 32 bytes are in Y(8+l).
		for l := 0; l < 8; l++ {
			skip := fmt.Sprintf("c8_skip%d_%d", half, l)
			partial := fmt.Sprintf("c8_partial%d_%d", half, l)
			MOVQ(Mem{Base: g, Disp: offLen + 8*l}, rem)
			SUBQ(off, rem)
			if half == 1 {
				SUBQ(U8(32), rem)
			}
			JLE(LabelRef(skip))
			key := fmt.Sprintf("c8_key%d_%d", half, l)
			data := fmt.Sprintf("c8_data%d_%d", half, l)
			MOVQ(Mem{Base: g, Disp: offPtr + 8*l}, ptr)
			ADDQ(off, ptr)
			if half == 1 {
				ADDQ(U8(32), ptr)
			}
			// A lane that begins with a Poly1305 key (chacha16): block 0
			// is the key (its first half stored, its second dropped),
			// block j > 0 goes to the message's bytes 64(j-1) on.
			MOVQ(Mem{Base: g, Disp: offRel + 8*l}, k)
			TESTQ(k, k)
			JZ(LabelRef(data))
			TESTQ(off, off)
			if half == 0 {
				JZ(LabelRef(key))
			} else {
				JZ(LabelRef(skip))
			}
			SUBQ(U8(64), ptr)
			Label(data)
			CMPQ(rem, U8(32))
			JB(LabelRef(partial))
			VPXOR(Mem{Base: ptr}, y(8+l), y(8+l))
			VMOVDQU(y(8+l), Mem{Base: ptr})
			JMP(LabelRef(skip))
			Label(partial)
			VMOVDQU(y(8+l), ks)
			XORQ(k, k)
			loop := fmt.Sprintf("c8_tail%d_%d", half, l)
			Label(loop)
			MOVB(ks.Idx(k, 1), tmp.As8())
			XORB(tmp.As8(), Mem{Base: ptr, Index: k, Scale: 1})
			INCQ(k)
			CMPQ(k, rem)
			JB(LabelRef(loop))
			JMP(LabelRef(skip))
			if half == 0 {
				// The key: stored, not XORed (chacha16).
				Label(key)
				VMOVDQU(y(8+l), Mem{Base: g, Index: k, Scale: 1})
			}
			Label(skip)
		}
	}

	INCQ(j)
	JMP(LabelRef("c8_block"))

	Label("c8_done")
	// Leave no key or key stream in registers or on the stack.
	VPXOR(Y0, Y0, Y0)
	VMOVDQU(Y0, ks)
	for i := 0; i < 8; i++ {
		VMOVDQU(Y0, rows.Offset(32*i))
	}
	VMOVDQU(Y0, park)
	VZEROALL()
	RET()
}
