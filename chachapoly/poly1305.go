package chachapoly

import (
	"encoding/binary"
	"math/bits"
)

// poly is one Poly1305 computation (RFC 8439 §2.5) in 64-bit limbs:
// the accumulator h = h2·2^128 + h1·2^64 + h0, kept below about 2^133 between
// blocks (partially reduced modulo p = 2^130 - 5), the clamped multiplier
// r = r1·2^64 + r0 and the final addend s = s1·2^64 + s0.
type poly struct {
	h0, h1, h2 uint64
	r0, r1     uint64
	s0, s1     uint64
}

// Clamp masks of r, RFC 8439 §2.5.1: the top four bits of every 32-bit word
// and the bottom two bits of words 1 to 3 are cleared.
const (
	rMask0 = 0x0ffffffc0fffffff
	rMask1 = 0x0ffffffc0ffffffc
)

func (p *poly) init(key *[32]byte) {
	*p = poly{
		r0: binary.LittleEndian.Uint64(key[0:]) & rMask0,
		r1: binary.LittleEndian.Uint64(key[8:]) & rMask1,
		s0: binary.LittleEndian.Uint64(key[16:]),
		s1: binary.LittleEndian.Uint64(key[24:]),
	}
}

// block absorbs one 16-byte block m1·2^64 + m0 with the 2^128 bit set.
func (p *poly) block(m0, m1 uint64) {
	h0, c := bits.Add64(p.h0, m0, 0)
	h1, c := bits.Add64(p.h1, m1, c)
	h2 := p.h2 + c + 1

	// t = h·r, 256 bits in t3..t0. r0, r1 < 2^60 and h2 < 8, so h2·r0,
	// h2·r1 and hi(h1·r1) fit 64 bits.
	hi00, t0 := bits.Mul64(h0, p.r0)
	hi01, lo01 := bits.Mul64(h0, p.r1)
	hi10, lo10 := bits.Mul64(h1, p.r0)
	hi11, lo11 := bits.Mul64(h1, p.r1)
	t1, c1 := bits.Add64(hi00, lo01, 0)
	t2, c2 := bits.Add64(hi01, lo11, c1)
	t3 := hi11 + c2
	t1, c1 = bits.Add64(t1, lo10, 0)
	t2, c2 = bits.Add64(t2, hi10, c1)
	t3 += c2
	t2, c2 = bits.Add64(t2, h2*p.r0, 0)
	t3 += c2 + h2*p.r1

	// t mod p: t = low130 + 2^130·k ≡ low130 + 5k = low130 + 4k + k, with
	// 4k = (t3:t2) with its two low bits cleared, k = (t3:t2) >> 2.
	h0, h1, h2 = t0, t1, t2&3
	h0, c = bits.Add64(h0, t2&^3, 0)
	h1, c = bits.Add64(h1, t3, c)
	h2 += c
	h0, c = bits.Add64(h0, t2>>2|t3<<62, 0)
	h1, c = bits.Add64(h1, t3>>2, c)
	h2 += c
	p.h0, p.h1, p.h2 = h0, h1, h2
}

// write absorbs b, zero-padded to a multiple of 16 bytes (the padding of
// RFC 8439 §2.8).
func (p *poly) write(b []byte) {
	for len(b) >= 16 {
		p.block(binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]))
		b = b[16:]
	}
	if len(b) > 0 {
		var t [16]byte
		copy(t[:], b)
		p.block(binary.LittleEndian.Uint64(t[:]), binary.LittleEndian.Uint64(t[8:]))
	}
}

// sum finishes the MAC into tag: h fully reduced, plus s modulo 2^128.
// Branch-free.
func (p *poly) sum(tag *[TagSize]byte) {
	h0, h1, h2 := p.h0, p.h1, p.h2
	// g = h + 5 - 2^130; if g >= 0 (bit 130 of h+5 set) then h >= p and
	// h mod p = g.
	g0, c := bits.Add64(h0, 5, 0)
	g1, c := bits.Add64(h1, 0, c)
	g2 := h2 + c
	m := -(g2 >> 2) // all ones when h >= p
	h0 = h0&^m | g0&m
	h1 = h1&^m | g1&m
	h0, c = bits.Add64(h0, p.s0, 0)
	h1, _ = bits.Add64(h1, p.s1, c)
	binary.LittleEndian.PutUint64(tag[0:], h0)
	binary.LittleEndian.PutUint64(tag[8:], h1)
}

// aeadTag computes the ChaCha20-Poly1305 tag of ad and ct under the one-time
// key pk (RFC 8439 §2.8): Poly1305 over ad, ct each padded to 16 bytes, then
// both lengths as 64-bit little-endian.
func aeadTag(tag *[TagSize]byte, pk *[32]byte, ad, ct []byte) {
	var p poly
	p.init(pk)
	p.write(ad)
	p.write(ct)
	p.block(uint64(len(ad)), uint64(len(ct)))
	p.sum(tag)
	p = poly{}
}
