package header

import (
	"encoding/binary"
	"net/netip"
)

// A UDPTemplate split in two (SplitIPv4): the part many flows share, and
// the 12 bytes that tell one of them from the others. A fast-path worker
// keeps one UDPv4Source and, per peer, a UDPv4Dst beside the rest of its
// per-peer state in one cache line, where a whole template (76 bytes)
// takes a line of its own: with traffic for thousands of peers every
// line is a cache miss.

// Offsets in the 42 bytes of untagged Ethernet + IPv4 + UDP headers.
const (
	splitDstAddr = EthernetLen + 16             // IPv4 destination address
	splitSrcAddr = EthernetLen + 12             // IPv4 source address
	splitDstPort = EthernetLen + IPv4MinLen + 2 // UDP destination port
	splitLen     = EthernetLen + IPv4MinLen + UDPLen
)

// UDPv4Source is what the untagged IPv4 flows without a UDP checksum
// from one source (Ethernet source, IPv4 source address, TOS, TTL, DF)
// have in common: their template's headers without the destination's
// MAC, address and port. Comparable with ==: two flows whose sources are
// equal share one. Immutable once built; the zero value is not usable.
type UDPv4Source struct {
	// sum is the IPv4 header's sum without the total length and the
	// destination address (both added by Put).
	sum uint32
	hdr [splitLen]byte // destination MAC, address and port and the header checksum zero
}

// UDPv4Dst is one flow's destination for a UDPv4Source: the next hop's
// MAC, the UDP port and the IPv4 address as they appear on the wire (12
// bytes, no padding, alignment 1).
type UDPv4Dst struct {
	mac  [6]byte
	port [2]byte // big endian
	addr [4]byte
}

// SplitIPv4 splits t, an untagged IPv4 template without the UDP checksum
// (the ones PutIPv4With writes), into its source and its destination;
// for any other template it reports false. For every srcPort, payloadLen,
// id and ecn, s.Put(b, &d, ...) writes the same bytes as
// t.PutIPv4With(b, ...).
func (t *UDPTemplate) SplitIPv4() (s UDPv4Source, d UDPv4Dst, ok bool) {
	if t.n != splitLen || t.udp4cs {
		return s, d, false
	}
	copy(s.hdr[:], t.hdr[:splitLen])
	copy(d.mac[:], s.hdr[0:6])
	copy(d.port[:], s.hdr[splitDstPort:splitDstPort+2])
	copy(d.addr[:], s.hdr[splitDstAddr:splitDstAddr+4])
	clear(s.hdr[0:6])
	clear(s.hdr[splitDstPort : splitDstPort+2])
	clear(s.hdr[splitDstAddr : splitDstAddr+4])
	clear(s.hdr[EthernetLen+10 : EthernetLen+12]) // the header checksum: Put's
	// The template's sum less the destination address: the header
	// summed again over the zeroed address (the total length is 0).
	h := s.hdr[EthernetLen : EthernetLen+IPv4MinLen]
	s.sum = uint32(FoldChecksum(Checksum(h[:10], Checksum(h[12:20], 0))))
	return s, d, true
}

// SrcAddr returns the IPv4 source address of the flows of s.
func (s *UDPv4Source) SrcAddr() netip.Addr {
	return netip.AddrFrom4([4]byte(s.hdr[splitSrcAddr : splitSrcAddr+4]))
}

// Put writes the headers of the flow from s to d into b[:42], for a
// datagram of payloadLen bytes from srcPort with the IPv4 identification
// id and ecn ORed into the ECN bits: the bytes PutIPv4With writes from
// the flow's template (SplitIPv4). b must be at least 42+payloadLen long;
// payloadLen must keep the IP length within 65535; ecn must be at most 3.
// It allocates nothing and does not keep b.
func (s *UDPv4Source) Put(b []byte, d *UDPv4Dst, srcPort uint16, payloadLen int, id uint16, ecn uint8) {
	b = b[:splitLen]
	h, le := &s.hdr, binary.LittleEndian
	// The source's 42 bytes, then the destination's three fields over
	// their zeros.
	copy42(b, h[:])
	le.PutUint32(b[0:], le.Uint32(d.mac[0:]))
	le.PutUint16(b[4:], le.Uint16(d.mac[4:]))
	le.PutUint16(b[splitDstPort:], le.Uint16(d.port[:]))
	le.PutUint32(b[splitDstAddr:], le.Uint32(d.addr[:]))
	// The header checksum: the source's sum, the address's two words,
	// the lengths, the identification and the ECN bits the TOS lacks
	// (as PutIPv4With): six values below 2^16, two folds.
	ulen := uint16(UDPLen + payloadLen)
	total := uint16(IPv4MinLen) + ulen
	be := binary.BigEndian
	hs := s.sum + uint32(be.Uint16(d.addr[0:])) + uint32(be.Uint16(d.addr[2:])) +
		uint32(total) + uint32(id) + uint32(ecn&^h[15])
	hs = hs>>16 + hs&0xffff
	hs += hs >> 16
	b[15] |= ecn
	be.PutUint16(b[16:18], total)
	be.PutUint16(b[18:20], id)
	be.PutUint16(b[24:26], ^uint16(hs))
	be.PutUint16(b[34:36], srcPort)
	be.PutUint16(b[38:40], ulen)
}
