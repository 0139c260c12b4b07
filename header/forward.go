package header

import (
	"encoding/binary"
	"net/netip"
)

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
		if p[8] <= 1 {
			return false
		}
		decrementTTL(p)
		return true
	}
	if p[7] <= 1 {
		return false
	}
	p[7]--
	return true
}

// DecrementHop is what Forward does to a packet it lets through, for a
// caller that checked the TTL or hop limit itself (at least 2; Parse and
// ParseL3 report it in Packet.TTL) and decrements it later: the IPv4 TTL − 1
// with an incremental header checksum update (RFC 1812 §5.3.1; RFC 1624
// §3), or the IPv6 hop limit − 1 (RFC 8200 §3). p is the IP packet (IPv4 or
// IPv6 by its version nibble), its header checked; no allocation.
func DecrementHop(p []byte) {
	_ = p[11] // both headers are longer: one bounds check for the rest
	if p[0]>>4 == IPv4Version {
		decrementTTL(p)
		return
	}
	p[7]--
}

// RestoreHop puts back the hop that Forward or DecrementHop took from p
// (IPv4 or IPv6 by its version nibble, its header checked): the IPv4 TTL
// + 1 with the header checksum computed again, or the IPv6 hop limit + 1.
// For a router that took the hop before a check Linux makes first (the
// MTU: ip_forward and ip6_forward answer "fragmentation needed" / "packet
// too big" before they lower the TTL), so that its error quotes the
// packet as it arrived. A rare path; no allocation.
func RestoreHop(p []byte) {
	if p[0]>>4 == IPv4Version {
		p[8]++
		IPv4(p).SetChecksum()
		return
	}
	p[7]++
}

// ParseForward is ParseL3 for a packet that a tunnel endpoint decapsulated
// and forwards as a router, with what both do to its header in the same
// step, while the parser holds it. When it returns OK:
//   - outerECN, the ECN field of the outer header the packet came in, has
//     been applied as DecapECN does (RFC 6040 §4.2; ECNNotECT for none);
//   - if the TTL / hop limit on arrival (p.TTL) is at least 2, it has been
//     lowered as DecrementHop does (RFC 1812 §5.3.1, RFC 8200 §3), and for
//     IPv4 p.Hop keeps the bytes it changed; with 0 or 1 it is left for the
//     caller to drop the packet and answer with time exceeded.
//
// On any other Reason pkt is unchanged. A packet that turns out to be for
// the router itself is not transit: UndoHop puts back the hop (not the
// ECN, which applies to every decapsulated packet).
//
// ParseForward does not allocate, does not keep pkt, and never reads or
// writes past it.
func ParseForward(pkt []byte, p *Packet, outerECN uint8) Reason {
	// The common packet, IPv4 without options from an outer header that
	// asks nothing of it (Not-ECT or ECT(0)), in one pass, as ParseL3.
	if len(pkt) >= IPv4MinLen && pkt[0] == ipv4VersionIHL5 && outerECN&ECNECT1 == 0 {
		b := pkt[:IPv4MinLen]
		total := int(binary.BigEndian.Uint16(b[2:4]))
		hop := binary.LittleEndian.Uint32(b[8:12]) // TTL, protocol, checksum
		s := uint64(binary.LittleEndian.Uint32(b[0:4])) + uint64(binary.LittleEndian.Uint32(b[4:8])) +
			uint64(hop) + uint64(binary.LittleEndian.Uint32(b[12:16])) +
			uint64(binary.LittleEndian.Uint32(b[16:20]))
		if total >= IPv4MinLen && total <= len(pkt) && fold35(s) == 0xffff {
			// As ParseL3 (FuzzParseForward holds them in step).
			p.L3Off = 0
			p.L3End = total
			p.L4Off = IPv4MinLen
			p.PayloadOff = IPv4MinLen
			p.PayloadLen = total - IPv4MinLen
			p.Src = netip.AddrFrom4([4]byte(b[12:16]))
			p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
			p.SrcPort, p.DstPort = 0, 0
			p.EtherType, p.VLANID, p.Tagged = 0, 0, false
			p.IPVersion = IPv4Version
			p.Proto = b[9]
			p.TTL = uint8(hop)
			p.Fragment = binary.BigEndian.Uint16(b[6:8])&(ipv4FlagMF|ipv4FragOffMask) != 0
			if uint8(hop) >= 2 {
				p.Hop = hop
				binary.LittleEndian.PutUint32(b[8:12], hopWord(hop))
			}
			return OK
		}
	}
	return parseForwardSlow(pkt, p, outerECN)
}

// parseForwardSlow is ParseForward for every other packet: IPv6, IPv4 with
// options, an outer ECT(1) or CE, and what ParseL3 rejects.
func parseForwardSlow(pkt []byte, p *Packet, outerECN uint8) Reason {
	if r := ParseL3(pkt, p); r != OK {
		return r
	}
	DecapECN(pkt, outerECN)
	if p.TTL >= 2 {
		if p.IPVersion == IPv4Version {
			p.Hop = binary.LittleEndian.Uint32(pkt[8:12])
		}
		DecrementHop(pkt)
	}
	return OK
}

// UndoHop puts back the TTL / hop limit (and the IPv4 checksum) of the IP
// packet pkt that ParseForward parsed into p and returned OK for, exactly as
// it came: an arithmetic inverse of the checksum update would not be exact
// for a checksum received as 0xffff.
func UndoHop(pkt []byte, p *Packet) {
	if p.TTL < 2 {
		return // ParseForward left it alone
	}
	if p.IPVersion == IPv4Version {
		binary.LittleEndian.PutUint32(pkt[8:12], p.Hop)
		return
	}
	pkt[7] = p.TTL
}

// hopWord returns the IPv4 header's bytes 8 to 11 (TTL, protocol,
// checksum), read little-endian as w, after the hop: TTL − 1 (w's low byte,
// at least 1) and the checksum updated incrementally. TTL is the high byte
// of the big-endian word at 8 (TTL, protocol): the word drops by 0x0100, so
// the stored checksum (its complement) rises by 0x0100 with end-around carry
// (RFC 1624 eqn. 3). A ones' complement sum does not depend on byte order
// (RFC 1071 §2(B)): read little-endian, the checksum rises by 1. A result of
// 0xffff (−0) is stored as 0, as a fresh computation would. Branch-free:
// one 32-bit load, five operations and one store.
func hopWord(w uint32) uint32 {
	v := uint64(w) - 1 + 1<<16   // TTL − 1 (no borrow); checksum + 1, its carry in bit 32
	v += (v + 1<<16) >> 32 << 16 // end-around carry, and 0xffff becomes 0: +1 exactly when the sum is >= 0xffff
	return uint32(v)
}

// decrementTTL lowers the TTL of the IPv4 header p (len(p) >= 12, TTL >= 1)
// with an incremental update of its checksum (hopWord).
func decrementTTL(p []byte) {
	binary.LittleEndian.PutUint32(p[8:12], hopWord(binary.LittleEndian.Uint32(p[8:12])))
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
