//go:build !purego

package chachapoly

import (
	"encoding/binary"
	"unsafe"
)

// poly8Lanes is the number of messages one poly8 pass MACs: two halves of
// four 64-bit lanes of YMM registers.
const poly8Lanes = 8

// poly8Group is the Poly1305 state of 8 lanes handed to poly8 (AVX2).
// Numbers are in five limbs of 26 bits (radix 2^26), limb-major. Lanes are
// right-aligned: lane l absorbs its total blocks at steps start[l] ..
// blocks-1 of the pass, so that all lanes end on the last step and none
// needs a mask on its accumulator (before its start a lane adds a zero block
// to a zero accumulator, which leaves it zero). Layout fixed
// (TestPoly8GroupLayout); it lives on the caller's stack and is wiped before
// the burst call returns.
type poly8Group struct {
	r       [5][poly8Lanes]uint64      // clamped r
	s       [4][poly8Lanes]uint64      // 5·r1 .. 5·r4: 2^130 ≡ 5 (mod 2^130-5)
	h       [5][poly8Lanes]uint64      // accumulator, partially reduced
	msg     [poly8Lanes]unsafe.Pointer // ciphertext start
	start   [poly8Lanes]uint64         // step of the lane's first block
	fullEnd [poly8Lanes]uint64         // start + full 16-byte blocks read from msg
	tailRel [poly8Lanes]uint64         // offset of tail[l] in the group, less 16·fullEnd
	tail    [poly8Lanes][2 * 16]byte   // padded last partial block, lengths block
	total   [poly8Lanes]uint64         // blocks in all (Go only)
	full    [poly8Lanes]uint64         // full blocks (Go only)
}

const (
	offPoly8Tail = 1152 // offset of poly8Group.tail
	mask26       = 1<<26 - 1
)

// poly8 is in chacha_amd64.s.
//
//go:noescape
func poly8(lanes *poly8Group, blocks uint64)

// load sets lane l (0..7) up to MAC ct (with empty additional data) under
// the one-time key pk (RFC 8439 §2.8), and returns the lane's block count.
// place must be called for every lane once the pass's length is known.
func (pg *poly8Group) load(l int, pk *[32]byte, ct []byte) (total uint64) {
	l &= poly8Lanes - 1
	r0 := binary.LittleEndian.Uint64(pk[0:]) & rMask0
	r1 := binary.LittleEndian.Uint64(pk[8:]) & rMask1
	l1, l2, l3, l4 := r0>>26&mask26, (r0>>52|r1<<12)&mask26, r1>>14&mask26, r1>>40
	pg.r[0][l], pg.r[1][l], pg.r[2][l], pg.r[3][l], pg.r[4][l] = r0&mask26, l1, l2, l3, l4
	pg.s[0][l], pg.s[1][l], pg.s[2][l], pg.s[3][l] = 5*l1, 5*l2, 5*l3, 5*l4
	pg.h[0][l], pg.h[1][l], pg.h[2][l], pg.h[3][l], pg.h[4][l] = 0, 0, 0, 0, 0
	n := len(ct)
	full := n / 16
	pg.msg[l] = unsafe.Pointer(unsafe.SliceData(ct))
	t := &pg.tail[l]
	total = uint64(full) + 1
	lens := t[:16]
	if rem := n % 16; rem > 0 {
		*t = [32]byte{}
		copy(t[:], ct[16*full:])
		lens = t[16:]
		total++
	}
	binary.LittleEndian.PutUint64(lens[0:], 0) // length of the additional data
	binary.LittleEndian.PutUint64(lens[8:], uint64(n))
	pg.full[l], pg.total[l] = uint64(full), total
	return total
}

// idle makes lane l absorb nothing.
func (pg *poly8Group) idle(l int) {
	l &= poly8Lanes - 1
	pg.msg[l], pg.full[l], pg.total[l] = nil, 0, 0
	pg.h[0][l], pg.h[1][l], pg.h[2][l], pg.h[3][l], pg.h[4][l] = 0, 0, 0, 0, 0
	// No key of an earlier chunk's packet stays in the lane.
	pg.r[0][l], pg.r[1][l], pg.r[2][l], pg.r[3][l], pg.r[4][l] = 0, 0, 0, 0, 0
	pg.s[0][l], pg.s[1][l], pg.s[2][l], pg.s[3][l] = 0, 0, 0, 0
}

// place right-aligns lane l in a pass of blocks steps.
func (pg *poly8Group) place(l int, blocks uint64) {
	l &= poly8Lanes - 1
	start := blocks - pg.total[l]
	fullEnd := start + pg.full[l]
	pg.start[l], pg.fullEnd[l] = start, fullEnd
	pg.tailRel[l] = uint64(offPoly8Tail+32*l) - 16*fullEnd
}

// tag finishes lane l into out with the addend from pk[16:32].
func (pg *poly8Group) tag(l int, pk *[32]byte, out *[TagSize]byte) {
	l &= poly8Lanes - 1
	h0, h1, h2, h3, h4 := pg.h[0][l], pg.h[1][l], pg.h[2][l], pg.h[3][l], pg.h[4][l]
	// Carry fully (folding the top back times 5), then once more without
	// folding: every limb below 2^26, except limb 4 at most 2^26.
	h1 += h0 >> 26
	h2 += h1 >> 26
	h3 += h2 >> 26
	h4 += h3 >> 26
	h0 = h0&mask26 + 5*(h4>>26)
	h1, h2, h3, h4 = h1&mask26, h2&mask26, h3&mask26, h4&mask26
	h1 += h0 >> 26
	h2 += h1 >> 26
	h3 += h2 >> 26
	h4 += h3 >> 26
	h0, h1, h2, h3 = h0&mask26, h1&mask26, h2&mask26, h3&mask26
	// Field by field: a composite literal is built in a compiler
	// temporary first, which the wipe below would not reach.
	var p poly
	p.h0, p.h1, p.h2 = h0|h1<<26|h2<<52, h2>>12|h3<<14|h4<<40, h4>>24
	p.s0, p.s1 = binary.LittleEndian.Uint64(pk[16:]), binary.LittleEndian.Uint64(pk[24:])
	p.sum(out)
	p = poly{} // as aeadTag: s is the one-time key's second half
}

// wipe erases the one-time keys and accumulators.
//
//go:noinline
func (pg *poly8Group) wipe() {
	clear(pg.r[:])
	clear(pg.s[:])
	clear(pg.h[:])
}
