package header

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 sizes (RFC 8200 §3, §4).
const (
	IPv6Len     = 40 // fixed header
	IPv6Version = 6
	// IPv6MinMTU is the minimum link MTU every IPv6 path has (RFC 8200 §5).
	IPv6MinMTU = 1280

	// MaxExtensionHeaders bounds the IPv6 extension headers Parse walks
	// before it gives up with ReasonTooManyExtensionHeaders: RFC 8200
	// §4.1 recommends an order with at most one of each except
	// Destination Options (twice), six in all, plus room for abuse-free
	// slack.
	MaxExtensionHeaders = 8

	ipv6FragmentLen = 8 // RFC 8200 §4.5
	ipv6ExtUnit     = 8 // Hdr Ext Len unit, RFC 8200 §4.3
)

// IPv6 is a view of an IPv6 packet starting at its fixed header. Accessors
// need len(h) >= IPv6Len; Payload needs the payload length checked (Parse,
// ParseIP).
type IPv6 []byte

// Version returns the version field (6 for a valid packet).
func (h IPv6) Version() uint8 { return h[0] >> 4 }

// TrafficClass returns the 8-bit traffic class (DSCP and ECN).
func (h IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(h[0:2]) >> 4)
}

// FlowLabel returns the 20-bit flow label.
func (h IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(h[0:4]) & 0xfffff }

// PayloadLength returns the payload length field: bytes after the fixed
// header, extension headers included. Jumbograms (RFC 2675, payload length
// 0 with a Hop-by-Hop jumbo option) are not supported.
func (h IPv6) PayloadLength() int { return int(binary.BigEndian.Uint16(h[4:6])) }

// NextHeader returns the next header field of the fixed header.
func (h IPv6) NextHeader() uint8 { return h[6] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[7] }

// Src returns the source address.
func (h IPv6) Src() netip.Addr { return netip.AddrFrom16([16]byte(h[8:24])) }

// Dst returns the destination address.
func (h IPv6) Dst() netip.Addr { return netip.AddrFrom16([16]byte(h[24:40])) }

// SrcBytes returns the source address as an array.
func (h IPv6) SrcBytes() [16]byte { return [16]byte(h[8:24]) }

// DstBytes returns the destination address as an array.
func (h IPv6) DstBytes() [16]byte { return [16]byte(h[24:40]) }

// Payload returns h[IPv6Len:IPv6Len+PayloadLength()], aliasing h.
func (h IPv6) Payload() []byte { return h[IPv6Len : IPv6Len+h.PayloadLength()] }

// UpperLayer walks the extension headers of the payload p (the bytes after
// the fixed header, up to the payload length) starting with next header nh,
// and returns the upper-layer protocol, its offset within p, and whether a
// Fragment header marks the packet as a fragment (offset nonzero or M set;
// an atomic fragment, RFC 6946, is not). For a fragment it stops at the
// Fragment header and returns the header that follows it and the offset of
// the fragment data.
//
// Walked (RFC 8200 §4.3–4.6): Hop-by-Hop Options (0, only as the first
// header), Routing (43), Fragment (44), Destination Options (60). Any other
// value, AH (51), ESP (50), No Next Header (59), Mobility (135) and
// experimental values included, is returned as the upper-layer protocol.
func UpperLayer(p []byte, nh uint8) (proto uint8, off int, fragment bool, r Reason) {
	for i := 0; i < MaxExtensionHeaders; i++ {
		switch nh {
		case ProtoHopByHop, ProtoRouting, ProtoDstOpts:
			if nh == ProtoHopByHop && i != 0 {
				return nh, off, false, ReasonBadExtensionHeader
			}
			if len(p)-off < 2 {
				return nh, off, false, ReasonBadExtensionHeader
			}
			n := (int(p[off+1]) + 1) * ipv6ExtUnit
			if len(p)-off < n {
				return nh, off, false, ReasonBadExtensionHeader
			}
			nh = p[off]
			off += n
		case ProtoFragment:
			if len(p)-off < ipv6FragmentLen {
				return nh, off, false, ReasonBadExtensionHeader
			}
			nh = p[off]
			fo := binary.BigEndian.Uint16(p[off+2 : off+4])
			off += ipv6FragmentLen
			if fo&^0x6 != 0 { // offset (13 bits) or M (bit 0); reserved bits ignored
				return nh, off, true, OK
			}
		default:
			return nh, off, false, OK
		}
	}
	switch nh {
	case ProtoHopByHop, ProtoRouting, ProtoDstOpts, ProtoFragment:
		return nh, off, false, ReasonTooManyExtensionHeaders
	}
	return nh, off, false, OK
}

// IPv6Fields are the values PutIPv6 writes; see IPv4Fields.
type IPv6Fields struct {
	TrafficClass uint8
	FlowLabel    uint32 // low 20 bits used
	NextHeader   uint8
	HopLimit     uint8 // 0 writes the default, 64
	Src, Dst     [16]byte
}

// PutIPv6 writes a fixed IPv6 header (no extension headers) with the fields
// of f and a payload length of payloadLen into b[:IPv6Len], and returns
// IPv6Len. b must be at least IPv6Len long; payloadLen must be in
// [0, 65535] (larger is truncated to 16 bits, a caller bug).
func PutIPv6(b []byte, f *IPv6Fields, payloadLen int) int {
	_ = b[IPv6Len-1]
	hl := f.HopLimit
	if hl == 0 {
		hl = defaultTTL
	}
	binary.BigEndian.PutUint32(b[0:4], IPv6Version<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(b[4:6], uint16(payloadLen))
	b[6] = f.NextHeader
	b[7] = hl
	copy(b[8:24], f.Src[:])
	copy(b[24:40], f.Dst[:])
	return IPv6Len
}

// SourceAddr returns the source address of the IP packet p, IPv4 or IPv6
// by its version nibble (p holds its fixed header: the caller checked it).
// It allocates nothing.
func SourceAddr(p []byte) netip.Addr {
	if p[0]>>4 == IPv4Version {
		return netip.AddrFrom4(IPv4(p).SrcBytes())
	}
	return netip.AddrFrom16(IPv6(p).SrcBytes())
}
