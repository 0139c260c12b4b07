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
// Key at keyOf[l] into key[w][l]. Each Key's eight words are one 32-byte
// load (two Keys a register, a lane without a Key reading an all-zero one),
// then a transpose in three rounds of two-source permutes (VPERMT2D), each
// halving the words a register holds of each Key and doubling its Keys:
// 16 loads and 24 permutes, where gathers took 128 loads of 4 bytes (34 ns
// a call against 12.5 on an AMD Zen 5; BenchmarkKernels/chacha16-keys).
func chachaKeys16() {
	// A register's layout: slot p holds word at[p].w of the Key of lane
	// at[p].l.
	type kw = struct{ l, w int }
	type layout [16]kw
	// The loads: register i holds lanes 2i (slots 0-7) and 2i+1 (8-15).
	var load [8]layout
	for i := range load {
		for p := range 16 {
			load[i][p] = kw{2*i + p/8, p % 8}
		}
	}
	// perm is the VPERMT2D index that makes layout out from a (table
	// indexes 0-15) and b (16-31).
	perm := func(a, b, out layout) [16]uint32 {
		var idx [16]uint32
		for p, want := range out {
			found := false
			for q := range 16 {
				if a[q] == want {
					idx[p], found = uint32(q), true
				} else if b[q] == want {
					idx[p], found = uint32(16+q), true
				}
			}
			if !found {
				panic(fmt.Sprintf("chachaKeys16: %v in neither source", want))
			}
		}
		return idx
	}
	// A round merges registers a and b (the Keys of b, as many as a's)
	// into two: the Keys of both, each with the first (lo) or second half
	// of the words a holds of its Keys.
	merge := func(a, b layout) (lo, hi layout) {
		var keysA, keysB, words []int
		for _, x := range a {
			if !contains(keysA, x.l) {
				keysA = append(keysA, x.l)
			}
			if !contains(words, x.w) {
				words = append(words, x.w)
			}
		}
		for _, x := range b {
			if !contains(keysB, x.l) {
				keysB = append(keysB, x.l)
			}
		}
		keys := append(keysA, keysB...)
		per := 16 / len(keys) // words of each Key in an output
		for p := range 16 {
			lo[p] = kw{keys[p/per], words[p%per]}
			hi[p] = kw{keys[p/per], words[per+p%per]}
		}
		return lo, hi
	}
	TEXT("chachaKeys16", NOSPLIT, "func(lanes *byte)")
	Doc("chachaKeys16 loads the key words of each lane of lanes (a group)",
		"whose keyOf is not nil from that Key into the group's key rows",
		"(zero rows for a lane without one).",
		"It requires AVX-512 F.")
	zeroKey := GLOBL("chacha16_zeroKey", RODATA|NOPTR)
	DATA(0, U64(0))
	DATA(8, U64(0))
	DATA(16, U64(0))
	DATA(24, U64(0))
	g, zero, k := GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	LEAQ(zeroKey, zero)
	for l := 0; l < 16; l++ {
		MOVQ(Mem{Base: g, Disp: offKeyOf + 8*l}, k)
		TESTQ(k, k)
		CMOVQEQ(zero, k)
		if l%2 == 0 {
			VMOVDQU32(Mem{Base: k}, z(l/2).AsY())
		} else {
			VINSERTI64X4(U8(1), Mem{Base: k}, z(l/2), z(l/2))
		}
	}
	// Three rounds, registers in Z0-Z7 (cur), out to Z8-Z15 and back
	// (pairs: Keys 2i and 2i+2 first, then 4i and 4i+4, then 0-7 and
	// 8-15), index vectors in Z16 up.
	cur := load
	regs := [2]int{0, 8}
	next := 16
	consts := map[[16]uint32]VecPhysical{}
	index := func(idx [16]uint32) VecPhysical {
		if r, ok := consts[idx]; ok {
			return r
		}
		m := GLOBL(fmt.Sprintf("chacha16_keyPerm%d", len(consts)), RODATA|NOPTR)
		for p, v := range idx {
			DATA(4*p, U32(v))
		}
		r := z(next)
		next++
		VMOVDQU32(m, r)
		consts[idx] = r
		return r
	}
	for round := 0; round < 3; round++ {
		from, to := regs[round%2], regs[(round+1)%2]
		var out [8]layout
		for i, pr := range pairs(cur) {
			x, y := cur[pr[0]], cur[pr[1]]
			lo, hi := merge(x, y)
			out[2*i], out[2*i+1] = lo, hi
			a, b := z(from+pr[0]), z(from+pr[1])
			VMOVDQA64(a, z(to+2*i))
			VPERMT2D(b, index(perm(x, y, lo)), z(to+2*i))
			VMOVDQA64(a, z(to+2*i+1))
			VPERMT2D(b, index(perm(x, y, hi)), z(to+2*i+1))
		}
		cur = out
	}
	// cur now holds one word of all 16 lanes a register, lanes in order:
	// store each as the row of its word.
	last := regs[1] // after three rounds: Z8-Z15
	for i, lay := range cur {
		for p, x := range lay {
			if x != (kw{p, lay[0].w}) {
				panic(fmt.Sprintf("chachaKeys16: register %d slot %d holds %v", i, p, x))
			}
		}
		VMOVDQU32(z(last+i), Mem{Base: g, Disp: offKey + 64*lay[0].w})
	}
	// Leave no key in vector registers.
	VZEROALL()
	RET()
}

// pairs pairs the registers of a round of chachaKeys16's transpose: a
// register whose lowest Key is a multiple of twice its Keys' count with
// the one that holds the same words of the Keys that follow, so that the
// Keys of every register stay a run in lane order.
func pairs[L ~[16]struct{ l, w int }](cur [8]L) (out [4][2]int) {
	n := 0
	for i, a := range cur {
		keys := 16 / wordsOf(a)
		if a[0].l%(2*keys) != 0 {
			continue
		}
		for j, b := range cur {
			if b[0].l == a[0].l+keys && b[0].w == a[0].w {
				out[n] = [2]int{i, j}
				n++
			}
		}
	}
	if n != 4 {
		panic("chachaKeys16: registers do not pair")
	}
	return out
}

// wordsOf is how many words of each Key a register holds (its Keys'
// words are in runs, the first Key first).
func wordsOf[L ~[16]struct{ l, w int }](a L) int {
	n := 0
	for n < 16 && a[n].l == a[0].l {
		n++
	}
	return n
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// sigma is the ChaCha20 constant "expand 32-byte k", RFC 8439 §2.3.
var sigma = [4]uint32{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574}

// z returns ZMM register i.
func z(i int) VecPhysical { return zmm[i] }

var zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}

// quarterRounds emits the quarter rounds (RFC 8439 §2.1) on the (a, b, c,
// d) word indexes of qs (four, or eight for two states), interleaved step
// by step: each register holds one state word of all 16 lanes.
func quarterRounds(qs [][4]int) {
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
	TEXT("chacha16", 0, "func(lanes *byte, blocks uint64)")
	Doc("chacha16 XORs blocks 0..blocks-1 of each of the 16 lanes' ChaCha20",
		"key streams (block counter ctr+j for block j) into bytes 64j .. 64j+63",
		"of the lane's message, masked to the lane's length. A lane whose rel",
		"is not 0 begins with a Poly1305 key: it stores the first 32 bytes of",
		"its block 0 at offset rel in the group, and its block j > 0 goes to",
		"bytes 64(j-1) on (n counts the key's 64). It requires AVX-512 F, BW",
		"and BMI2.")
	// Two blocks of every lane a pass while two remain: a state of 16
	// lanes in Z0-Z15 and the next block's in Z16-Z31, their rounds
	// interleaved. One state's quarter rounds are four chains of
	// additions, XORs and rotations, each waiting for the one before
	// (two cycles each on an AMD Zen 5, which issues four 512-bit
	// additions a cycle): two states keep twice the work in flight
	// (BenchmarkKernels/chacha16-block and -pair). The initial states are
	// added back from memory: the constants', the group's key and nonce
	// rows, and the two counter rows kept in ctrs.
	ctrs := AllocLocal(128)   // counter rows of the pair's two blocks
	spill := AllocLocal(1024) // the second block's state while the first is stored
	chachaSigma = GLOBL("chacha16_sigma", RODATA|NOPTR)
	for i, c := range sigma {
		for l := 0; l < 16; l++ {
			DATA(64*i+4*l, U32(c))
		}
	}
	ones := GLOBL("chacha16_ones", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		DATA(4*l, U32(1))
	}
	g, j, jn := GP64(), GP64(), GP64()
	Load(Param("lanes"), g)
	XORQ(j, j)
	Load(Param("blocks"), jn)
	off := GP64()
	cnt := GP64()
	tmp := GP64()
	rem := GP64()
	ptr := GP64()
	rel := GP64()

	Label("block")
	CMPQ(j, jn)
	JAE(LabelRef("done"))
	MOVQ(jn, tmp)
	SUBQ(j, tmp)
	CMPQ(tmp, U8(2))
	JB(LabelRef("single"))

	// The pair: block j in Z0..Z15, block j+1 in Z16..Z31.
	loadState(g, 0, j)
	for i := 0; i < 16; i++ {
		VMOVDQA64(z(i), z(16+i))
	}
	VPADDD(ones, z(28), z(28))
	VMOVDQU32(z(12), ctrs.Offset(0))
	VMOVDQU32(z(28), ctrs.Offset(64))
	rounds(cnt, "pair_rounds", 0, 16)
	finishTwo(spill, func(b int) {
		addInitial(g, ctrs.Offset(64*b))
		transpose()
		MOVQ(j, off)
		if b == 1 {
			INCQ(off)
		}
		SHLQ(U8(6), off)
		storeLanes(g, g, off, rem, ptr, rel, tmp, fmt.Sprintf("p%d_", b))
	})
	ADDQ(U8(2), j)
	JMP(LabelRef("block"))

	// One block of every lane: initial state in Z16..Z31, working copy
	// in Z0..Z15.
	Label("single")
	loadState(g, 16, j)
	for i := 0; i < 16; i++ {
		VMOVDQA64(z(16+i), z(i))
	}
	rounds(cnt, "rounds", 0)

	for i := 0; i < 16; i++ {
		VPADDD(z(16+i), z(i), z(i))
	}
	transpose()

	MOVQ(j, off)
	SHLQ(U8(6), off)
	storeLanes(g, g, off, rem, ptr, rel, tmp, "")

	INCQ(j)
	JMP(LabelRef("block"))

	Label("done")
	// Leave no key or key stream in vector registers, nor on the stack.
	wipeSpill(spill)
	RET()
}

// chacha16x2 emits the kernel for two groups of one block each (block 0
// of every lane: a pass of open's Poly1305 keys, or of 64-byte messages):
// group a's state in Z0..Z15 and b's in Z16..Z31, their rounds
// interleaved as chacha16's pair of blocks, so that two groups of one
// block take one pass's time and a third, not two.
func chacha16x2() {
	TEXT("chacha16x2", 0, "func(a *byte, b *byte)")
	Doc("chacha16x2 XORs block 0 of each lane's ChaCha20 key stream (block",
		"counter ctr) of groups a and b as chacha16(a, 1) and chacha16(b, 1) do,",
		"but that the Poly1305 keys of both go to offset rel of group a.",
		"It requires AVX-512 F, BW and BMI2.")
	spill := AllocLocal(1024) // b's state while a's is stored
	ga, gb := GP64(), GP64()
	Load(Param("a"), ga)
	Load(Param("b"), gb)
	off, tmp, rem, ptr, rel, cnt := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	gs := []Register{ga, gb}
	loadState(ga, 0, nil)
	loadState(gb, 16, nil)
	rounds(cnt, "x2_rounds", 0, 16)
	XORQ(off, off)
	finishTwo(spill, func(k int) {
		addInitial(gs[k], Mem{Base: gs[k], Disp: offCtr})
		transpose()
		storeLanes(gs[k], ga, off, rem, ptr, rel, tmp, fmt.Sprintf("x%d_", k))
	})
	wipeSpill(spill)
	RET()
}

// loadState emits the load of group g's initial ChaCha20 state into
// registers base..base+15 (one state word of the 16 lanes each): the
// constants, the key rows, the counter row of block j (of block 0, the
// group's counters, if j is nil) and the nonce rows.
func loadState(g Register, base int, j GPVirtual) {
	for i := 0; i < 4; i++ {
		VMOVDQU32(chachaSigma.Offset(64*i), z(base+i))
	}
	for w := 0; w < 8; w++ {
		VMOVDQU32(Mem{Base: g, Disp: offKey + 64*w}, z(base+4+w))
	}
	ctr := Mem{Base: g, Disp: offCtr}
	if j == nil {
		VMOVDQU32(ctr, z(base+12))
	} else {
		VPBROADCASTD(j.As32(), z(base+12))
		VPADDD(ctr, z(base+12), z(base+12))
	}
	for w := 0; w < 3; w++ {
		VMOVDQU32(Mem{Base: g, Disp: offNonce + 64*w}, z(base+13+w))
	}
}

// rounds emits ChaCha20's 10 double rounds (a column round, then a
// diagonal one) in a loop labelled label, counting in cnt, on the states
// in registers base..base+15 for each base given (one, or two whose
// rounds are interleaved).
func rounds(cnt GPVirtual, label string, bases ...int) {
	MOVL(U32(10), cnt.As32())
	Label(label)
	for _, qs := range [][4][4]int{
		{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}},
		{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}},
	} {
		var all [][4]int
		for _, b := range bases {
			for _, q := range qs {
				all = append(all, [4]int{b + q[0], b + q[1], b + q[2], b + q[3]})
			}
		}
		quarterRounds(all)
	}
	DECL(cnt.As32())
	JNZ(LabelRef(label))
}

// finishTwo emits the end of a pass of two states (Z0..Z15 and
// Z16..Z31): the second spilled to the stack, each then finished by
// each(k) in Z0..Z15, the second reloaded first.
func finishTwo(spill Mem, each func(k int)) {
	for i := 0; i < 16; i++ {
		VMOVDQU32(z(16+i), spill.Offset(64*i))
	}
	for k := 0; k < 2; k++ {
		if k == 1 {
			for i := 0; i < 16; i++ {
				VMOVDQU32(spill.Offset(64*i), z(i))
			}
		}
		each(k)
	}
}

// addInitial emits the addition of a block's initial state to the rounds'
// output in Z0..Z15: the constants, group g's key and nonce rows, and the
// counter row at ctr.
func addInitial(g Register, ctr Mem) {
	for i := 0; i < 4; i++ {
		VPADDD(chachaSigma.Offset(64*i), z(i), z(i))
	}
	for w := 0; w < 8; w++ {
		VPADDD(Mem{Base: g, Disp: offKey + 64*w}, z(4+w), z(4+w))
	}
	VPADDD(ctr, z(12), z(12))
	for w := 0; w < 3; w++ {
		VPADDD(Mem{Base: g, Disp: offNonce + 64*w}, z(13+w), z(13+w))
	}
}

// wipeSpill emits the clearing of the vector registers and of a spilled
// state on the stack: no key or key stream is left behind.
func wipeSpill(spill Mem) {
	VZEROALL()
	for i := 16; i < 32; i++ {
		VPXORD(z(i), z(i), z(i))
	}
	for i := 0; i < 16; i++ {
		VMOVDQU32(Z16, spill.Offset(64*i))
	}
}

// chachaSigma is the constants' rows (each word of sigma in all 16 lanes),
// defined by chacha16.
var chachaSigma Mem

// storeLanes emits the XOR of the 16 lanes' blocks (lane l's in
// register l, lane-major) into their messages at block offset off (64j),
// masked to each lane's length; a lane that begins with a Poly1305 key
// stores its block 0's first 32 bytes at offset rel of the group at keys
// instead. Labels are prefixed with pre. Z16 is scratch.
func storeLanes(g, keys, off, rem, ptr, rel, tmp Register, pre string) {
	for l := 0; l < 16; l++ {
		partial := fmt.Sprintf("%spartial%d", pre, l)
		skip := fmt.Sprintf("%sskip%d", pre, l)
		key := fmt.Sprintf("%skey%d", pre, l)
		data := fmt.Sprintf("%sdata%d", pre, l)
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
		VMOVDQU(z(l).AsY(), Mem{Base: keys, Index: rel, Scale: 1})
		Label(skip)
	}
}
