package header

import "encoding/binary"

// UDPLen is the size of a UDP header (RFC 768).
const UDPLen = 8

// UDP is a view of a UDP datagram starting at its header. Accessors need
// len(u) >= UDPLen; Payload, ComputeChecksum and VerifyChecksum need
// len(u) >= Length(), which Parse checks.
type UDP []byte

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[0:2]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[2:4]) }

// Length returns the length field: header and data, in bytes.
func (u UDP) Length() int { return int(binary.BigEndian.Uint16(u[4:6])) }

// Checksum returns the checksum field; 0 means "no checksum" on IPv4
// (RFC 768) and is invalid on IPv6 (RFC 8200 §8.1).
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[6:8]) }

// Payload returns u[UDPLen:Length()], aliasing u.
func (u UDP) Payload() []byte { return u[UDPLen:u.Length()] }

// ComputeChecksum returns the checksum field value for u[:Length()] given
// the pseudo-header partial sum pseudo (PseudoHeaderChecksum with ProtoUDP
// and Length()), the field taken as zero. A computed 0 is returned as
// 0xffff, since 0 means "no checksum" (RFC 768).
func (u UDP) ComputeChecksum(pseudo uint32) uint16 {
	n := u.Length()
	s := Checksum(u[:6], pseudo)
	c := ^FoldChecksum(Checksum(u[UDPLen:n], s))
	if c == 0 {
		c = 0xffff
	}
	return c
}

// SetChecksum computes and stores the checksum (see ComputeChecksum).
func (u UDP) SetChecksum(pseudo uint32) {
	binary.BigEndian.PutUint16(u[6:8], u.ComputeChecksum(pseudo))
}

// VerifyChecksum reports whether the sum over the pseudo-header and
// u[:Length()], checksum included, is 0xffff. A zero checksum field is
// reported as false: on IPv4 the caller checks Checksum() == 0 first if it
// accepts datagrams without checksum (RFC 768); on IPv6 zero is invalid
// (RFC 8200 §8.1).
func (u UDP) VerifyChecksum(pseudo uint32) bool {
	if u.Checksum() == 0 {
		return false
	}
	return FoldChecksum(Checksum(u[:u.Length()], pseudo)) == 0xffff
}

// PutUDP writes a UDP header with a length of UDPLen + payloadLen and a
// zero checksum into b[:UDPLen] and returns UDPLen. Call SetChecksum after
// the payload is in place, or leave the checksum 0 on IPv4 (RFC 768). b must
// be at least UDPLen long.
func PutUDP(b []byte, srcPort, dstPort uint16, payloadLen int) int {
	_ = b[UDPLen-1]
	binary.BigEndian.PutUint16(b[0:2], srcPort)
	binary.BigEndian.PutUint16(b[2:4], dstPort)
	binary.BigEndian.PutUint16(b[4:6], uint16(UDPLen+payloadLen))
	binary.BigEndian.PutUint16(b[6:8], 0)
	return UDPLen
}
