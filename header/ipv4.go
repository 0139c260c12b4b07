package header

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 sizes, offsets and flags (RFC 791 §3.1).
const (
	IPv4MinLen  = 20 // header without options (IHL 5)
	IPv4MaxLen  = 60 // header with 40 bytes of options (IHL 15)
	IPv4Version = 4

	ipv4FlagDF      = 0x4000 // don't fragment
	ipv4FlagMF      = 0x2000 // more fragments
	ipv4FragOffMask = 0x1fff // fragment offset, in 8-byte units
	ipv4ChecksumOff = 10
	// defaultTTL is the TTL or hop limit written when none is given
	// (Linux net.ipv4.ip_default_ttl and net.ipv6.conf.*.hop_limit).
	defaultTTL      = 64
	ipv4VersionIHL5 = 0x45
)

// IP protocol numbers (IANA "Assigned Internet Protocol Numbers"), used in
// the IPv4 protocol field and the IPv6 next header field.
const (
	ProtoHopByHop = 0
	ProtoICMPv4   = 1
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoRouting  = 43 // IPv6 Routing header, RFC 8200 §4.4
	ProtoFragment = 44 // IPv6 Fragment header, RFC 8200 §4.5
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59 // IPv6 No Next Header, RFC 8200 §4.7
	ProtoDstOpts  = 60 // IPv6 Destination Options, RFC 8200 §4.6
)

// IPv4 is a view of an IPv4 packet starting at its header. Accessors need
// len(h) >= IPv4MinLen; Options and Payload need the lengths that Parse or
// ParseIP checked (IHL within the slice, total length within the slice).
type IPv4 []byte

// Version returns the version field (4 for a valid packet).
func (h IPv4) Version() uint8 { return h[0] >> 4 }

// HeaderLen returns the header length in bytes (IHL × 4, 20 to 60).
func (h IPv4) HeaderLen() int { return int(h[0]&0x0f) * 4 }

// TOS returns the type-of-service byte (DSCP and ECN, RFC 2474, RFC 3168).
func (h IPv4) TOS() uint8 { return h[1] }

// TotalLength returns the total length field: header and data, in bytes.
func (h IPv4) TotalLength() int { return int(binary.BigEndian.Uint16(h[2:4])) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return binary.BigEndian.Uint16(h[4:6]) }

// DontFragment reports whether the DF flag is set.
func (h IPv4) DontFragment() bool { return binary.BigEndian.Uint16(h[6:8])&ipv4FlagDF != 0 }

// MoreFragments reports whether the MF flag is set.
func (h IPv4) MoreFragments() bool { return binary.BigEndian.Uint16(h[6:8])&ipv4FlagMF != 0 }

// FragmentOffset returns the fragment offset in bytes (the field × 8).
func (h IPv4) FragmentOffset() int {
	return int(binary.BigEndian.Uint16(h[6:8])&ipv4FragOffMask) * 8
}

// IsFragment reports whether the packet is a fragment, first or later: MF
// set or a nonzero fragment offset (RFC 791 §3.2). A packet with neither is
// whole, whatever its DF flag says.
func (h IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(h[6:8])&(ipv4FlagMF|ipv4FragOffMask) != 0
}

// TTL returns the time-to-live field.
func (h IPv4) TTL() uint8 { return h[8] }

// Protocol returns the protocol field (ProtoUDP, ProtoTCP, ...).
func (h IPv4) Protocol() uint8 { return h[9] }

// Checksum returns the header checksum field.
func (h IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(h[10:12]) }

// Src returns the source address.
func (h IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(h[12:16])) }

// Dst returns the destination address.
func (h IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(h[16:20])) }

// SrcBytes returns the source address as an array.
func (h IPv4) SrcBytes() [4]byte { return [4]byte(h[12:16]) }

// DstBytes returns the destination address as an array.
func (h IPv4) DstBytes() [4]byte { return [4]byte(h[16:20]) }

// Options returns the options, h[IPv4MinLen:HeaderLen()], aliasing h.
func (h IPv4) Options() []byte { return h[IPv4MinLen:h.HeaderLen()] }

// Payload returns the data after the header up to the total length,
// h[HeaderLen():TotalLength()], aliasing h: padding past the total length
// is not included.
func (h IPv4) Payload() []byte { return h[h.HeaderLen():h.TotalLength()] }

// ComputeChecksum returns the header checksum field value for the header
// h[:HeaderLen()], computed with the field taken as zero (RFC 791 §3.1).
// It needs len(h) >= HeaderLen().
func (h IPv4) ComputeChecksum() uint16 {
	hl := h.HeaderLen()
	s := Checksum(h[:ipv4ChecksumOff], 0)
	return ^FoldChecksum(Checksum(h[ipv4ChecksumOff+2:hl], s))
}

// VerifyChecksum reports whether the header checksum is right: the sum over
// h[:HeaderLen()], checksum included, is 0xffff (RFC 1071 §1(4)).
func (h IPv4) VerifyChecksum() bool {
	return FoldChecksum(Checksum(h[:h.HeaderLen()], 0)) == 0xffff
}

// SetChecksum computes and stores the header checksum.
func (h IPv4) SetChecksum() {
	binary.BigEndian.PutUint16(h[10:12], h.ComputeChecksum())
}

// DecrementTTL lowers the TTL by one and updates the header checksum
// incrementally (RFC 1624 §3; RFC 1812 §5.3.1 forwarding). It returns the
// new TTL; at TTL 0 it leaves the header alone and returns 0, and the caller
// must drop the packet (RFC 1812 §5.3.1).
func (h IPv4) DecrementTTL() uint8 {
	ttl := h[8]
	if ttl == 0 {
		return 0
	}
	old := binary.BigEndian.Uint16(h[8:10])
	h[8] = ttl - 1
	binary.BigEndian.PutUint16(h[10:12], UpdateChecksum(h.Checksum(), old, binary.BigEndian.Uint16(h[8:10])))
	return ttl - 1
}

// IPv4Fields are the values PutIPv4 writes. A worker keeps one per peer as a
// template; PutIPv4 reads it and does not keep it.
type IPv4Fields struct {
	TOS          uint8 // DSCP and ECN
	TTL          uint8 // 0 writes the default, 64 (Linux net.ipv4.ip_default_ttl)
	Protocol     uint8
	ID           uint16
	DontFragment bool
	Src, Dst     [4]byte
}

// PutIPv4 writes a 20-byte IPv4 header without options (IHL 5, fragment
// offset 0, MF clear) with the fields of f, a total length of IPv4MinLen +
// payloadLen and its checksum, into b[:IPv4MinLen], and returns IPv4MinLen.
// b must be at least IPv4MinLen long; payloadLen must be in [0, 65515]
// (larger values are truncated to 16 bits, a caller bug).
func PutIPv4(b []byte, f *IPv4Fields, payloadLen int) int {
	_ = b[IPv4MinLen-1]
	ttl := f.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	var flags uint16
	if f.DontFragment {
		flags = ipv4FlagDF
	}
	total := uint16(IPv4MinLen + payloadLen)
	b[0] = ipv4VersionIHL5
	b[1] = f.TOS
	binary.BigEndian.PutUint16(b[2:4], total)
	binary.BigEndian.PutUint16(b[4:6], f.ID)
	binary.BigEndian.PutUint16(b[6:8], flags)
	b[8] = ttl
	b[9] = f.Protocol
	copy(b[12:16], f.Src[:])
	copy(b[16:20], f.Dst[:])
	// The header checksum, summed from the values in registers rather
	// than read back from b (a load spanning fresh byte stores stalls
	// store-to-load forwarding). 32-bit address words fold like pairs of
	// 16-bit words since 2^16 ≡ 1 (mod 0xffff).
	s := uint64(ipv4VersionIHL5)<<8 | uint64(f.TOS)
	s += uint64(total) + uint64(f.ID) + uint64(flags) + (uint64(ttl)<<8 | uint64(f.Protocol))
	s += uint64(binary.BigEndian.Uint32(f.Src[:])) + uint64(binary.BigEndian.Uint32(f.Dst[:]))
	binary.BigEndian.PutUint16(b[10:12], ^fold35(s))
	return IPv4MinLen
}
