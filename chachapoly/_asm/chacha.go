package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Offsets of the fields of chachapoly.group; TestGroupLayout in the package
// checks that they match the Go struct.
const (
	offKey   = 0    // [8][16]uint32 key words, word-major
	offNonce = 512  // [3][16]uint32 nonce words, word-major
	offPtr   = 704  // [16]unsafe.Pointer start of each lane's message
	offLen   = 832  // [16]int bytes of each lane's message
	offCtr   = 960  // [16]uint32 block counter of each lane's first block
	offRel   = 1024 // [16]uint64 if not 0: the lane begins with a Poly1305 key, stored at this offset in the group
	offKeyOf = 3200 // [16]*Key each lane's key (its 8 words first), nil if none
)

// chachaKeys16 emits the load of the 16 lanes' key words: word w of the
// Key at keyOf[l] into key[w][l], by gathers (16 lanes × 8 words: the
// transpose that cost 128 loads and 128 stores in Go for a burst of
// packets to as many peers).
func chachaKeys16() {
	TEXT("chachaKeys16", NOSPLIT, "func(lanes *byte)")
	Doc("chachaKeys16 loads the key words of each lane of lanes (a group)",
		"whose keyOf is not nil from that Key into the group's key rows.",
		"It requires AVX-512 F.")
	g, zero := GP64(), GP64()
	Load(Param("lanes"), g)
	XORQ(zero, zero)
	p0, p1 := Z0, Z1
	VMOVDQU64(Mem{Base: g, Disp: offKeyOf}, p0)
	VMOVDQU64(Mem{Base: g, Disp: offKeyOf + 64}, p1)
	VPTESTMQ(p0, p0, K2) // lanes 0..7 with a key
	VPTESTMQ(p1, p1, K3) // lanes 8..15
	for w := 0; w < 8; w++ {
		VPXORD(Z2, Z2, Z2)
		VPXORD(Z3, Z3, Z3)
		KMOVW(K2, K1)
		VPGATHERQD(Mem{Base: zero, Index: p0, Scale: 1, Disp: 4 * w}, K1, Y2)
		KMOVW(K3, K1)
		VPGATHERQD(Mem{Base: zero, Index: p1, Scale: 1, Disp: 4 * w}, K1, Y3)
		VINSERTI64X4(U8(1), Y3, Z2, Z2)
		VMOVDQU32(Z2, Mem{Base: g, Disp: offKey + 64*w})
	}
	// Leave no key in vector registers.
	VZEROALL()
	RET()
}

// sigma is the ChaCha20 constant "expand 32-byte k", RFC 8439 §2.3.
var sigma = [4]uint32{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574}

// z returns ZMM register i.
func z(i int) VecPhysical { return zmm[i] }

var zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}

// quarterRounds emits the quarter rounds (RFC 8439 §2.1) on the four
// (a, b, c, d) word indexes of qs, interleaved step by step: each register
// holds one state word of all 16 lanes.
func quarterRounds(qs [4][4]int) {
	ops := []struct{ add, to, xor, rot int }{
		{1, 0, 3, 16}, // a += b; d ^= a; d <<<= 16
		{3, 2, 1, 12}, // c += d; b ^= c; b <<<= 12
		{1, 0, 3, 8},  // a += b; d ^= a; d <<<= 8
		{3, 2, 1, 7},  // c += d; b ^= c; b <<<= 7
	}
	for _, o := range ops {
		for _, q := range qs {
			VPADDD(z(q[o.add]), z(q[o.to]), z(q[o.to]))
		}
		for _, q := range qs {
			VPXORD(z(q[o.to]), z(q[o.xor]), z(q[o.xor]))
		}
		for _, q := range qs {
			VPROLD(U8(o.rot), z(q[o.xor]), z(q[o.xor]))
		}
	}
}

// transpose4 transposes the 32-bit words of the four rows r within each
// 128-bit chunk (word j of row i to word i of row j), with t[0..3] as
// scratch.
func transpose4(r, t []VecPhysical) {
	VPUNPCKLDQ(r[1], r[0], t[0])
	VPUNPCKHDQ(r[1], r[0], t[1])
	VPUNPCKLDQ(r[3], r[2], t[2])
	VPUNPCKHDQ(r[3], r[2], t[3])
	VPUNPCKLQDQ(t[2], t[0], r[0])
	VPUNPCKHQDQ(t[2], t[0], r[1])
	VPUNPCKLQDQ(t[3], t[1], r[2])
	VPUNPCKHQDQ(t[3], t[1], r[3])
}

// transpose turns Z0..Z15 from word-major (register w holds word w of the
// 16 lanes) into lane-major (register l holds the 64-byte block of lane l),
// using Z16..Z19 as scratch.
func transpose() {
	t := []VecPhysical{Z16, Z17, Z18, Z19}
	// 4x4 dword transposes inside each 128-bit chunk of four rows.
	for g := 0; g < 4; g++ {
		transpose4([]VecPhysical{z(4 * g), z(4*g + 1), z(4*g + 2), z(4*g + 3)}, t)
	}
	// 4x4 transposes of 128-bit chunks across the four groups.
	for i := 0; i < 4; i++ {
		a, b, c, d := z(i), z(4+i), z(8+i), z(12+i)
		VSHUFI32X4(U8(0x44), b, a, t[0])
		VSHUFI32X4(U8(0xee), b, a, t[1])
		VSHUFI32X4(U8(0x44), d, c, t[2])
		VSHUFI32X4(U8(0xee), d, c, t[3])
		VSHUFI32X4(U8(0x88), t[2], t[0], a)
		VSHUFI32X4(U8(0xdd), t[2], t[0], b)
		VSHUFI32X4(U8(0x88), t[3], t[1], c)
		VSHUFI32X4(U8(0xdd), t[3], t[1], d)
	}
}

func chacha16() {
	TEXT("chacha16", NOSPLIT, "func(lanes *byte, blocks uint64)")
	Doc("chacha16 XORs blocks 0..blocks-1 of each of the 16 lanes' ChaCha20",
		"key streams (block counter ctr+j for block j) into bytes 64j .. 64j+63",
		"of the lane's message, masked to the lane's length. A lane whose rel",
		"is not 0 begins with a Poly1305 key: it stores the first 32 bytes of",
		"its block 0 at offset rel in the group, and its block j > 0 goes to",
		"bytes 64(j-1) on (n counts the key's 64). It requires AVX-512 F, BW",
		"and BMI2.")
	g, j, jn := GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	XORQ(j, j)
	Load(Param("blocks"), jn)
	off := GP64()
	cnt := GP64()
	tmp := GP64()

	Label("block")
	CMPQ(j, jn)
	JAE(LabelRef("done"))

	// Initial state in Z16..Z31, working copy in Z0..Z15.
	for i, c := range sigma {
		MOVL(U32(c), tmp.As32())
		VPBROADCASTD(tmp.As32(), z(16+i))
	}
	for w := 0; w < 8; w++ {
		VMOVDQU32(Mem{Base: g, Disp: offKey + 64*w}, z(20+w))
	}
	VPBROADCASTD(j.As32(), z(28))
	VPADDD(Mem{Base: g, Disp: offCtr}, z(28), z(28))
	for w := 0; w < 3; w++ {
		VMOVDQU32(Mem{Base: g, Disp: offNonce + 64*w}, z(29+w))
	}
	for i := 0; i < 16; i++ {
		VMOVDQA64(z(16+i), z(i))
	}

	MOVL(U32(10), cnt.As32())
	Label("rounds")
	quarterRounds([4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}})
	quarterRounds([4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}})
	DECL(cnt.As32())
	JNZ(LabelRef("rounds"))

	for i := 0; i < 16; i++ {
		VPADDD(z(16+i), z(i), z(i))
	}
	transpose()

	MOVQ(j, off)
	SHLQ(U8(6), off)
	rem := GP64()
	ptr := GP64()
	rel := GP64()
	for l := 0; l < 16; l++ {
		partial := fmt.Sprintf("partial%d", l)
		skip := fmt.Sprintf("skip%d", l)
		key := fmt.Sprintf("key%d", l)
		data := fmt.Sprintf("data%d", l)
		MOVQ(Mem{Base: g, Disp: offLen + 8*l}, rem)
		SUBQ(off, rem)
		JLE(LabelRef(skip))
		MOVQ(Mem{Base: g, Disp: offPtr + 8*l}, ptr)
		ADDQ(off, ptr)
		MOVQ(Mem{Base: g, Disp: offRel + 8*l}, rel)
		TESTQ(rel, rel)
		JZ(LabelRef(data))
		// A lane that begins with a Poly1305 key: block 0 is the key,
		// block j > 0 goes to the message's bytes 64(j-1) on.
		TESTQ(off, off)
		JZ(LabelRef(key))
		SUBQ(U8(64), ptr)
		Label(data)
		at := Mem{Base: ptr}
		CMPQ(rem, U8(64))
		JB(LabelRef(partial))
		VPXORD(at, z(l), z(l))
		VMOVDQU32(z(l), at)
		JMP(LabelRef(skip))
		Label(partial)
		MOVQ(I32(-1), tmp)
		BZHIQ(rem, tmp, tmp)
		KMOVQ(tmp, K1)
		VMOVDQU8_Z(at, K1, Z16)
		VPXORD(Z16, z(l), z(l))
		VMOVDQU8(z(l), K1, at)
		JMP(LabelRef(skip))
		// The key: the block's first 32 bytes stored, not XORed; no
		// masked load of memory Go has just written, which the store
		// buffer cannot forward (a pass of 16 key lanes took 251 ns that
		// way against 169 for 16 full blocks).
		Label(key)
		VMOVDQU(z(l).AsY(), Mem{Base: g, Index: rel, Scale: 1})
		Label(skip)
	}

	INCQ(j)
	JMP(LabelRef("block"))

	Label("done")
	// Leave no key or key stream in vector registers.
	VZEROALL()
	for i := 16; i < 32; i++ {
		VPXORD(z(i), z(i), z(i))
	}
	RET()
}
