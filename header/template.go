package header

import (
	"encoding/binary"
	"net/netip"
)

// UDPTemplate is the outer Ethernet (optionally 802.1Q tagged), IPv4 or
// IPv6, and UDP headers of one UDP flow, built once (when a peer's endpoint
// or next hop changes) and stamped in front of each datagram by Put with
// only the lengths, source port and checksums changed. It is the cheapest
// way to prepend outer headers on the fast path.
//
// A UDPTemplate is immutable after NewUDPTemplate and safe for concurrent
// use by several workers; the zero value is not usable.
//
// The lengths and flags come first and the header bytes after them, so
// that Put for IPv4 (42 or 46 bytes of headers) reads the first 55 bytes
// of the 76: one cache line when the template starts on one (a fast-path
// worker keeps one per peer it does not reach from its shared source,
// UDPv4Source, and with traffic for thousands of peers every line of it
// counts).
type UDPTemplate struct {
	sum    uint32 // IPv4: header sum without total length; IPv6: pseudo-header sum without length and ports
	n      uint8  // bytes of headers: L2 + L3 + UDP (at most 66)
	l3     uint8  // offset of the IP header
	l4     uint8  // offset of the UDP header
	v6     bool   // IPv6 rather than IPv4
	udp4cs bool   // compute the UDP checksum on IPv4 too
	hdr    [EthernetVLANLen + IPv6Len + UDPLen]byte
}

// UDPTemplateConfig describes the flow of a UDPTemplate.
type UDPTemplateConfig struct {
	Dst, Src MAC // Ethernet destination (next hop) and source
	VLANID   int // 802.1Q VLAN ID, or -1 for an untagged frame
	SrcAddr  netip.Addr
	DstAddr  netip.Addr // same family as SrcAddr
	DstPort  uint16
	TOS      uint8 // IPv4 TOS or IPv6 traffic class
	TTL      uint8 // IPv4 TTL or IPv6 hop limit; 0 means 64
	// DontFragment sets DF on IPv4 (IPv6 routers never fragment).
	DontFragment bool
	// UDPChecksumIPv4 computes the UDP checksum over IPv4 too; without it
	// the field is 0, "no checksum" (RFC 768). Over IPv6 the checksum is
	// always computed (RFC 8200 §8.1).
	UDPChecksumIPv4 bool
}

// NewUDPTemplate builds the headers of c. It reports false when the
// addresses are invalid or of different families.
func NewUDPTemplate(c UDPTemplateConfig) (UDPTemplate, bool) {
	var t UDPTemplate
	src, dst := c.SrcAddr.Unmap(), c.DstAddr.Unmap()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return t, false
	}
	t.v6 = src.Is6()
	et := uint16(EtherTypeIPv4)
	if t.v6 {
		et = EtherTypeIPv6
	}
	if c.VLANID >= 0 {
		t.l3 = uint8(PutEthernetVLAN(t.hdr[:], c.Dst, c.Src, uint16(c.VLANID), et))
	} else {
		t.l3 = uint8(PutEthernet(t.hdr[:], c.Dst, c.Src, et))
	}
	if t.v6 {
		f := IPv6Fields{TrafficClass: c.TOS, NextHeader: ProtoUDP, HopLimit: c.TTL, Src: src.As16(), Dst: dst.As16()}
		t.l4 = t.l3 + uint8(PutIPv6(t.hdr[t.l3:], &f, 0))
		// Pseudo-header with length 0 and the constant UDP word (the
		// destination port); Put adds the rest.
		t.sum = PseudoHeaderChecksum(ProtoUDP, src, dst, 0) + uint32(c.DstPort)
	} else {
		f := IPv4Fields{TOS: c.TOS, TTL: c.TTL, Protocol: ProtoUDP, DontFragment: c.DontFragment, Src: src.As4(), Dst: dst.As4()}
		t.l4 = t.l3 + uint8(PutIPv4(t.hdr[t.l3:], &f, 0))
		// Header sum with total length 0: Put adds the length.
		h := t.hdr[t.l3:t.l4]
		binary.BigEndian.PutUint16(h[2:4], 0)
		t.sum = uint32(FoldChecksum(Checksum(h[:10], Checksum(h[12:20], 0))))
		t.udp4cs = c.UDPChecksumIPv4
		if t.udp4cs {
			t.sum |= uint32(FoldChecksum(PseudoHeaderChecksum(ProtoUDP, src, dst, 0)+uint32(c.DstPort))) << 16
		}
	}
	t.n = uint8(PutUDP(t.hdr[t.l4:], 0, c.DstPort, 0)) + t.l4
	return t, true
}

// Len returns the bytes of headers Put writes: 42 (IPv4) or 62 (IPv6),
// plus 4 with a VLAN tag.
func (t *UDPTemplate) Len() int { return int(t.n) }

// IPOffset returns the offset of the IP header within the headers.
func (t *UDPTemplate) IPOffset() int { return int(t.l3) }

// PutIPv4With is Put for an untagged IPv4 template without the UDP
// checksum (Len() 42) that also stores the identification id (the
// template has 0 there) and ORs ecn into the TOS byte's ECN bits (0 in
// the template unless its TOS set them), with the header checksum computed
// once for all of them: the same bytes as Put followed by those two stores
// and an incremental checksum update (RFC 1624), in one pass. For any
// other template it writes nothing and returns false. b must be at least
// Len()+payloadLen long; payloadLen must keep the IP length within 65535;
// ecn must be at most 3.
func (t *UDPTemplate) PutIPv4With(b []byte, srcPort uint16, payloadLen int, id uint16, ecn uint8) bool {
	if t.n != EthernetLen+IPv4MinLen+UDPLen || t.udp4cs {
		return false
	}
	d := b[:42]
	t.copy42(d)
	// IP at 14, UDP at 34. The sum of four values below 2^16: two folds.
	// The TOS word grows by the ECN bits the OR sets, those of ecn the
	// template's TOS does not have already.
	ulen := uint16(UDPLen + payloadLen)
	total := uint16(IPv4MinLen) + ulen
	hs := t.sum&0xffff + uint32(total) + uint32(id) + uint32(ecn&^t.hdr[15])
	hs = hs>>16 + hs&0xffff
	hs += hs >> 16
	d[15] |= ecn
	binary.BigEndian.PutUint16(d[16:18], total)
	binary.BigEndian.PutUint16(d[18:20], id)
	binary.BigEndian.PutUint16(d[24:26], ^uint16(hs))
	binary.BigEndian.PutUint16(d[34:36], srcPort)
	binary.BigEndian.PutUint16(d[38:40], ulen)
	return true
}

// copy42 copies the first 42 bytes of the template's headers (all of an
// untagged IPv4 one's; Put's IPv6 case copies the rest) into d in 8-byte
// words, which compile to register moves (a memmove call costs more than
// the copy).
func (t *UDPTemplate) copy42(d []byte) { copy42(d, t.hdr[:]) }

// copy42 copies h[:42] into d[:42] in 8-byte words.
func copy42(d, h []byte) {
	h, d = h[:42], d[:42]
	le := binary.LittleEndian
	le.PutUint64(d[0:], le.Uint64(h[0:]))
	le.PutUint64(d[8:], le.Uint64(h[8:]))
	le.PutUint64(d[16:], le.Uint64(h[16:]))
	le.PutUint64(d[24:], le.Uint64(h[24:]))
	le.PutUint64(d[32:], le.Uint64(h[32:]))
	le.PutUint16(d[40:], le.Uint16(h[40:]))
}

// Put writes the headers into b[:Len()] for a datagram of payloadLen bytes
// from srcPort, the payload already in b[Len():Len()+payloadLen], and
// returns Len(). It sets the IPv4 total length and header checksum or the
// IPv6 payload length, the UDP length, and the UDP checksum over the
// payload when one is due (always on IPv6). b must be at least
// Len()+payloadLen long; payloadLen must keep the IP length within 65535.
// It allocates nothing and does not keep b.
func (t *UDPTemplate) Put(b []byte, srcPort uint16, payloadLen int) int {
	n := int(t.n)
	_ = b[n-1]
	// The untagged headers are copied in 8-byte words, which compile to
	// register moves; a memmove call costs more than the copy.
	switch n {
	case EthernetLen + IPv4MinLen + UDPLen: // 42 = 5×8 + 2
		// The common case, no UDP checksum, with its offsets known:
		// identification 0 (the template's) and no ECN bits added.
		if t.PutIPv4With(b, srcPort, payloadLen, 0, 0) {
			return 42
		}
		t.copy42(b)
	case EthernetLen + IPv6Len + UDPLen: // 62 = 7×8 + 6
		t.copy42(b)
		h, d := &t.hdr, b[:62]
		le := binary.LittleEndian
		le.PutUint64(d[40:], le.Uint64(h[40:]))
		le.PutUint64(d[48:], le.Uint64(h[48:]))
		le.PutUint32(d[56:], le.Uint32(h[56:]))
		le.PutUint16(d[60:], le.Uint16(h[60:]))
	default:
		copy(b, t.hdr[:n])
	}
	ulen := uint16(UDPLen + payloadLen)
	l3 := int(t.l3)
	u := b[t.l4:n]
	binary.BigEndian.PutUint16(u[0:2], srcPort)
	binary.BigEndian.PutUint16(u[4:6], ulen)
	if t.v6 {
		binary.BigEndian.PutUint16(b[l3+4:l3+6], ulen)
		// Pseudo-header (with the length) + header words + payload; the
		// length appears twice: once in the pseudo-header, once in UDP.
		s := Checksum(b[n:n+payloadLen], t.sum+2*uint32(ulen)+uint32(srcPort))
		c := ^FoldChecksum(s)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:8], c)
		return n
	}
	total := uint16(IPv4MinLen) + ulen
	binary.BigEndian.PutUint16(b[l3+2:l3+4], total)
	hs := t.sum&0xffff + uint32(total) // < 2^17: one fold and its carry
	hs = hs>>16 + hs&0xffff
	binary.BigEndian.PutUint16(b[l3+10:l3+12], ^uint16(hs+hs>>16))
	if t.udp4cs {
		s := Checksum(b[n:n+payloadLen], t.sum>>16+2*uint32(ulen)+uint32(srcPort))
		c := ^FoldChecksum(s)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:8], c)
	}
	return n
}
