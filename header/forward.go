package header

import "encoding/binary"

// DecrementHopLimit lowers the IPv6 hop limit by one (RFC 8200 §3: "decremented
// by 1 by each node that forwards the packet"; IPv6 has no header checksum).
// It returns the new hop limit; at 0 it leaves the header alone and returns 0.
func (h IPv6) DecrementHopLimit() uint8 {
	hl := h[7]
	if hl == 0 {
		return 0
	}
	h[7] = hl - 1
	return hl - 1
}

// Forward does what a router does to the IP header of a transit packet p
// (IPv4 or IPv6 by its version nibble, its header already checked by Parse,
// ParseIP or ParseL3) before sending it on: it decrements the IPv4 TTL with
// an incremental header checksum update (RFC 1812 §5.3.1; RFC 1624 §3) or
// the IPv6 hop limit (RFC 8200 §3). It returns false, and leaves p alone,
// when the packet would leave with 0 (TTL or hop limit 0 or 1 on arrival):
// the caller drops it and answers with time exceeded (PutICMPv4TimeExceeded,
// PutICMPv6TimeExceeded).
//
// One load, one compare and, for IPv4, one checksum update; no allocation.
func Forward(p []byte) bool {
	_ = p[11] // both headers are longer: one bounds check for the rest
	if p[0]>>4 == IPv4Version {
		ttl := p[8]
		if ttl <= 1 {
			return false
		}
		// TTL is the high byte of the word at 8 (TTL, protocol): the
		// word drops by 0x0100, so the stored checksum (its complement)
		// rises by 0x0100 with end-around carry (RFC 1624 eqn. 3). A sum
		// of 0xffff (−0) is stored as 0, as a fresh computation would.
		// Branch-free: (s+1)>>16 is 1 exactly when s >= 0xffff.
		p[8] = ttl - 1
		s := uint32(binary.BigEndian.Uint16(p[10:12])) + 0x0100
		s += (s + 1) >> 16
		binary.BigEndian.PutUint16(p[10:12], uint16(s))
		return true
	}
	if p[7] <= 1 {
		return false
	}
	p[7]--
	return true
}

// ECN codepoints, the two low bits of the IPv4 TOS byte and the IPv6 traffic
// class (RFC 3168 §5).
const (
	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
)

// ECN returns the ECN field of the IP packet p (IPv4 or IPv6 by its
// version nibble; len(p) >= 2).
func ECN(p []byte) uint8 {
	if p[0]>>4 == IPv4Version {
		return p[1] & 3
	}
	return p[1] >> 4 & 3
}

// EncapECN returns the ECN field an encapsulator writes in the outer header
// for an inner packet with ECN field inner, as the Linux kernel's WireGuard
// does (ip_tunnel_ecn_encap with an outer TOS of 0, after RFC 6040 §4.1 and
// RFC 3168 §9.1.1): Not-ECT, ECT(0) and ECT(1) are copied; CE becomes ECT(0),
// so that a congestion mark made before the tunnel is not counted twice. The
// outer DSCP is 0 (the inner DSCP is not copied, as the kernel does).
func EncapECN(inner uint8) uint8 {
	if inner&3 == ECNCE {
		return ECNECT0
	}
	return inner & 3
}

// DecapECN applies the outer header's ECN field outer to the decapsulated
// IP packet p (IPv4 or IPv6 by its version nibble), following the table of
// RFC 6040 §4.2: an outer CE marks an ECN-capable inner packet CE, an outer
// ECT(1) turns an inner ECT(0) into ECT(1); everything else leaves p alone.
// The IPv4 header checksum is updated incrementally (RFC 1624). An outer CE
// on a Not-ECT inner packet (RFC 6040 says drop) is forwarded unchanged, as
// the kernel's WireGuard does (it ignores INET_ECN_decapsulate's verdict);
// DecapECN reports that case with false so that the caller may count it.
func DecapECN(p []byte, outer uint8) bool {
	outer &= 3
	if outer == ECNNotECT || outer == ECNECT0 {
		return true
	}
	in := ECN(p)
	var want uint8
	switch {
	case in == ECNNotECT:
		return outer != ECNCE
	case outer == ECNCE:
		want = ECNCE
	case in == ECNECT0: // outer ECT(1)
		want = ECNECT1
	default:
		return true
	}
	if want == in {
		return true
	}
	if p[0]>>4 == IPv4Version {
		old := binary.BigEndian.Uint16(p[0:2])
		p[1] = p[1]&^3 | want
		binary.BigEndian.PutUint16(p[10:12], UpdateChecksum(binary.BigEndian.Uint16(p[10:12]), old, binary.BigEndian.Uint16(p[0:2])))
		return true
	}
	p[1] = p[1]&^0x30 | want<<4
	return true
}
