package header

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Checksum adds the bytes of b to the partial Internet checksum initial and
// returns the new partial sum (RFC 1071 §4.1: the 16-bit ones' complement
// sum of b read as big-endian 16-bit words; an odd final byte is padded with
// a zero byte on its right).
//
// Partial sums chain: Checksum(b2, Checksum(b1, 0)) folds to the same value
// as Checksum(b1||b2, 0) provided len(b1) is even. A partial sum is any uint32 congruent to the
// ones' complement sum; fold it with FoldChecksum before use, and store the
// complement ^FoldChecksum(sum) in a header's checksum field. initial may be
// any uint32 (another partial sum, a PseudoHeaderChecksum).
//
// It reads b eight bytes at a time with an add-with-carry chain (RFC 1071
// §2(B): the sum is independent of byte order, so words are loaded in the
// machine's little-endian order and the result is swapped once at the end).
// It does not keep b and allocates nothing.
func Checksum(b []byte, initial uint32) uint32 {
	var s, c uint64
	for len(b) >= 32 {
		_ = b[31]
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:24]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	if len(b) >= 16 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), c)
		b = b[16:]
	}
	if len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint32(b[0:4])), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint16(b[0:2])), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// The odd byte is the high byte of a big-endian word, that is
		// the low byte in the little-endian domain used here.
		s, c = bits.Add64(s, uint64(b[0]), c)
	}
	s, c = bits.Add64(s, 0, c)
	s += c
	le := fold64(s)
	return fold32(uint64(bits.ReverseBytes16(le)) + uint64(initial))
}

// fold64 folds a 64-bit ones' complement sum to 16 bits (2^16 ≡ 1 mod
// 0xffff, so shifting the high parts down with end-around carry keeps the
// value).
func fold64(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// fold35 folds a ones' complement sum below 2^35 (a handful of 32-bit
// words) to 16 bits: one 32-bit fold leaves at most 2^32+6, and two 16-bit
// folds absorb the carries.
func fold35(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// fold32 folds a sum held in 64 bits to a partial sum that fits 32 bits.
func fold32(s uint64) uint32 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	return uint32(s)
}

// FoldChecksum folds a partial sum from Checksum or PseudoHeaderChecksum to
// the 16-bit ones' complement sum (RFC 1071 §4.1 "fold 32-bit sum to 16
// bits"). The value for a header's checksum field is its complement,
// ^FoldChecksum(sum); a received header verifies when FoldChecksum of the sum
// over it (checksum field included) is 0xffff.
func FoldChecksum(sum uint32) uint16 {
	return fold64(uint64(sum))
}

// PseudoHeaderChecksum returns the partial sum of the pseudo-header that
// UDP, TCP and ICMPv6 checksums cover: for IPv4 (RFC 768; RFC 793 §3.1)
// source, destination, zero, protocol and the 16-bit upper-layer length; for
// IPv6 (RFC 8200 §8.1) source, destination, the 32-bit upper-layer length,
// three zero bytes and the next header. When src and dst are both IPv4 the
// IPv4 form is used, otherwise the IPv6 form (IPv4-mapped addresses count as
// IPv6; an invalid Addr counts as ::). length is the upper-layer packet
// length in bytes (header and data). Feed the result to Checksum as initial.
func PseudoHeaderChecksum(proto uint8, src, dst netip.Addr, length int) uint32 {
	if src.Is4() && dst.Is4() {
		s4, d4 := src.As4(), dst.As4()
		return pseudo4(proto, &s4, &d4, length)
	}
	s16, d16 := src.As16(), dst.As16()
	return pseudo6(proto, &s16, &d16, length)
}

// PseudoHeaderChecksumBytes is PseudoHeaderChecksum with the addresses as
// byte slices, for addresses read straight out of a frame: src and dst are
// both 4 bytes (IPv4) or both 16 bytes (IPv6); any other length returns the
// sum for whatever bytes are given, which is not a valid pseudo-header. It
// does not keep src or dst.
func PseudoHeaderChecksumBytes(proto uint8, src, dst []byte, length int) uint32 {
	if len(src) == 4 && len(dst) == 4 {
		return pseudo4(proto, (*[4]byte)(src), (*[4]byte)(dst), length)
	}
	if len(src) == 16 && len(dst) == 16 {
		return pseudo6(proto, (*[16]byte)(src), (*[16]byte)(dst), length)
	}
	return Checksum(dst, Checksum(src, uint32(proto)+uint32(length)))
}

func pseudo4(proto uint8, src, dst *[4]byte, length int) uint32 {
	s := uint64(binary.BigEndian.Uint16(src[0:2])) + uint64(binary.BigEndian.Uint16(src[2:4])) +
		uint64(binary.BigEndian.Uint16(dst[0:2])) + uint64(binary.BigEndian.Uint16(dst[2:4])) +
		uint64(proto) + uint64(uint16(length))
	return fold32(s)
}

func pseudo6(proto uint8, src, dst *[16]byte, length int) uint32 {
	var s, c uint64
	s, c = bits.Add64(s, binary.BigEndian.Uint64(src[0:8]), c)
	s, c = bits.Add64(s, binary.BigEndian.Uint64(src[8:16]), c)
	s, c = bits.Add64(s, binary.BigEndian.Uint64(dst[0:8]), c)
	s, c = bits.Add64(s, binary.BigEndian.Uint64(dst[8:16]), c)
	s, c = bits.Add64(s, uint64(uint32(length))<<32|uint64(proto), c)
	s, c = bits.Add64(s, 0, c)
	s += c
	return uint32(fold64(s))
}

// UpdateChecksum returns the checksum field value after one 16-bit word
// covered by it changes from old to new, without summing the rest again
// (RFC 1624 §3, eqn. 3: HC' = ~(~HC + ~m + m')). cksum is the field as
// stored (already complemented). For UDP, a field of 0 means "no checksum"
// (RFC 768) and must be left alone by the caller.
func UpdateChecksum(cksum, old, new uint16) uint16 {
	s := uint32(^cksum) + uint32(^old) + uint32(new)
	return ^FoldChecksum(s)
}

// UpdateChecksumBytes is UpdateChecksum for a run of bytes, such as an
// address, that changed from old to new. old and new must have the same,
// even length. It does not keep old or new.
func UpdateChecksumBytes(cksum uint16, old, new []byte) uint16 {
	s := uint32(^cksum) + uint32(^FoldChecksum(Checksum(old, 0))) + uint32(FoldChecksum(Checksum(new, 0)))
	return ^FoldChecksum(s)
}
