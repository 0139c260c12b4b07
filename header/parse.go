package header

import (
	"encoding/binary"
	"net/netip"
)

// TCP and ICMP header sizes Parse checks (RFC 9293 §3.1, RFC 792,
// RFC 4443 §2.1).
const (
	TCPMinLen    = 20
	ICMPv4Len    = 8 // type, code, checksum, 4 bytes of message-specific data
	ICMPv6MinLen = 4 // type, code, checksum
)

// Packet is what Parse learns about a frame: offsets into the frame (in
// bytes from its first byte) and the fields the hot path needs. The caller
// owns it and reuses it across frames; Parse overwrites every field, and
// keeps no reference to the frame.
//
// Invariants after OK or ReasonFragment:
// L3Off <= L4Off <= PayloadOff <= PayloadOff+PayloadLen <= L3End <= len(frame).
// L3End is where the IP packet ends by its own length field: bytes past it
// are Ethernet padding and belong to no payload.
type Packet struct {
	L3Off      int // Ethernet header length: 14, or 18 with an 802.1Q tag (0 for ParseIP)
	L3End      int // L3Off + IPv4 total length, or L3Off + 40 + IPv6 payload length
	L4Off      int // upper-layer header (after IPv4 options or IPv6 extension headers); fragment data for a fragment
	PayloadOff int // data after the UDP, TCP or ICMP header; L4Off for other protocols and fragments
	PayloadLen int // bytes of data: UDP length − 8 for UDP, up to L3End otherwise

	Src, Dst netip.Addr // IP source and destination
	// SrcPort and DstPort are the UDP or TCP ports; 0 for other protocols
	// and for fragments.
	SrcPort, DstPort uint16

	EtherType uint16 // after the 802.1Q tag; 0 for ParseIP
	VLANID    uint16 // 12-bit VLAN ID when Tagged
	Tagged    bool   // an 802.1Q tag was present
	IPVersion uint8  // 4 or 6
	Proto     uint8  // upper-layer protocol (IPv4 protocol, or last IPv6 next header)
	TTL       uint8  // IPv4 TTL or IPv6 hop limit (as received)
	Fragment  bool   // IPv4 MF or offset, or an IPv6 Fragment header with offset or M
	// Hop is what ParseForward changed when it lowered the TTL or hop
	// limit: an IPv4 header's bytes 8 to 11 (TTL, protocol, checksum)
	// before, little-endian, for UndoHop. The other parsers leave it alone.
	Hop uint32
}

// Parse parses an Ethernet II frame (optionally 802.1Q tagged) carrying
// IPv4 or IPv6, and its UDP, TCP or ICMP header, into p. It returns OK when
// every length is consistent, ReasonFragment (with the L3 fields filled)
// for an IP fragment, and another Reason when the frame must be dropped; p's
// fields are meaningful only for OK and ReasonFragment.
//
// Checked: frame length against the Ethernet and tag; IP version against
// the EtherType; IPv4 IHL >= 5 and within the frame, total length >= IHL×4
// and within the frame, header checksum (RFC 1122 §3.2.1.2); IPv6 payload
// length within the frame and the extension headers (see UpperLayer); UDP
// length >= 8 and within the IP payload, a nonzero checksum on IPv6 (RFC
// 8200 §8.1), but not the UDP checksum itself (use UDP.VerifyChecksum);
// TCP and ICMP header lengths. Bytes past the IP length (Ethernet padding)
// are ignored. Addresses are not judged (multicast, martians): that is the
// caller's policy.
//
// Parse does not allocate, does not keep frame, and never reads past it.
func Parse(frame []byte, p *Packet) Reason {
	// The common frame on both sides of a gateway, untagged UDP or TCP
	// over IPv4 without options or fragmentation, is checked in one pass;
	// anything else, or anything that fails a check, takes the general
	// path, which finds the reason.
	if len(frame) > EthernetLen && frame[12] == 0x08 && frame[13] == 0x00 && frame[14] == ipv4VersionIHL5 &&
		parseIPv4Fast(frame, EthernetLen, p) {
		p.EtherType = EtherTypeIPv4
		return OK
	}
	// The same behind one 802.1Q tag (a gateway on a VLAN of a trunk).
	if len(frame) > EthernetVLANLen && frame[12] == 0x81 && frame[13] == 0x00 && frame[16] == 0x08 && frame[17] == 0x00 &&
		frame[18] == ipv4VersionIHL5 && parseIPv4Fast(frame, EthernetVLANLen, p) {
		p.EtherType = EtherTypeIPv4
		p.Tagged = true
		p.VLANID = binary.BigEndian.Uint16(frame[14:16]) & VLANIDMask
		return OK
	}
	*p = Packet{}
	if len(frame) < EthernetLen {
		return ReasonRunt
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	off := EthernetLen
	if et == EtherTypeVLAN {
		if len(frame) < EthernetVLANLen {
			return ReasonRunt
		}
		p.Tagged = true
		p.VLANID = binary.BigEndian.Uint16(frame[14:16]) & VLANIDMask
		et = binary.BigEndian.Uint16(frame[16:18])
		off = EthernetVLANLen
	}
	p.EtherType = et
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(frame, off, p)
	case EtherTypeIPv6:
		return parseIPv6(frame, off, p)
	}
	return ReasonNotIP
}

// ParseIP is Parse for a bare IP packet (a decrypted inner packet, a TUN
// read): the version nibble picks IPv4 or IPv6, L3Off is 0 and EtherType is
// left 0. L3End tells where the packet ends by its own length: a caller
// trimming WireGuard padding uses pkt[:p.L3End].
func ParseIP(pkt []byte, p *Packet) Reason {
	if len(pkt) > 0 && pkt[0] == ipv4VersionIHL5 && parseIPv4Fast(pkt, 0, p) {
		p.EtherType = 0
		return OK
	}
	return parseBare(pkt, p, parseIPv4, parseIPv6)
}

// parseBare zeroes p and hands a bare IP packet to v4 or v6 by its version
// nibble.
func parseBare(pkt []byte, p *Packet, v4, v6 func([]byte, int, *Packet) Reason) Reason {
	*p = Packet{}
	if len(pkt) < 1 {
		return ReasonTruncatedIP
	}
	switch pkt[0] >> 4 {
	case IPv4Version:
		return v4(pkt, 0, p)
	case IPv6Version:
		return v6(pkt, 0, p)
	}
	return ReasonBadVersion
}

// ParseL3 parses only the IP header of a bare IP packet, making the checks
// a router makes before it forwards one (RFC 1812 §5.2.2 for IPv4: a whole
// header, version 4, IHL >= 5 and within pkt, total length >= IHL × 4 and
// within pkt, header checksum; for IPv6 the fixed header and the payload
// length within pkt, RFC 8200 §3). The upper layer is not judged: a gateway
// forwards what it does not understand. It fills p as ParseIP does but for
// the upper layer: Proto is the IPv4 protocol or the fixed IPv6 header's
// Next Header (extension headers are not walked), L4Off is the end of the
// IPv4 header or 40, PayloadOff = L4Off, PayloadLen = L3End − L4Off, the
// ports are 0, and Fragment is set for an IPv4 fragment (MF or an offset)
// only. It returns OK, also for a fragment, or the Reason of a bad header.
//
// ParseL3 does not allocate, does not keep pkt, and never reads past it.
func ParseL3(pkt []byte, p *Packet) Reason {
	// The common packet, IPv4 without options, in one pass.
	if len(pkt) >= IPv4MinLen && pkt[0] == ipv4VersionIHL5 {
		b := pkt[:IPv4MinLen]
		total := int(binary.BigEndian.Uint16(b[2:4]))
		s := uint64(binary.LittleEndian.Uint32(b[0:4])) + uint64(binary.LittleEndian.Uint32(b[4:8])) +
			uint64(binary.LittleEndian.Uint32(b[8:12])) + uint64(binary.LittleEndian.Uint32(b[12:16])) +
			uint64(binary.LittleEndian.Uint32(b[16:20]))
		if total >= IPv4MinLen && total <= len(pkt) && fold35(s) == 0xffff {
			// Every field is written, one by one (no zeroing pass,
			// no copy of a struct with pointers).
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
			p.TTL = b[8]
			p.Fragment = binary.BigEndian.Uint16(b[6:8])&(ipv4FlagMF|ipv4FragOffMask) != 0
			return OK
		}
	}
	return parseBare(pkt, p, parseIPv4Header, parseIPv6Header)
}

func parseIPv4(frame []byte, off int, p *Packet) Reason {
	if r := parseIPv4Header(frame, off, p); r != OK {
		return r
	}
	if p.Fragment {
		return ReasonFragment
	}
	if p.Proto == ProtoUDP {
		return parseUDP(frame[p.L4Off:p.L3End], p, false)
	}
	return parseL4(frame[:p.L3End], p, false)
}

// parseIPv4Header checks the IPv4 header at frame[off:] and fills p's L3
// fields, with PayloadOff = L4Off and PayloadLen the rest of the packet. p
// must be zero but for what the caller set.
func parseIPv4Header(frame []byte, off int, p *Packet) Reason {
	p.L3Off = off
	b := frame[off:]
	if len(b) < IPv4MinLen {
		return ReasonTruncatedIP
	}
	if b[0]>>4 != IPv4Version {
		return ReasonBadVersion
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < IPv4MinLen || ihl > len(b) {
		return ReasonBadIHL
	}
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if total < ihl {
		return ReasonBadTotalLength
	}
	if total > len(b) {
		return ReasonLengthExceedsFrame
	}
	if !ipv4HeaderSumOK(b[:ihl]) {
		return ReasonBadIPv4Checksum
	}
	p.IPVersion = IPv4Version
	p.TTL = b[8]
	p.Proto = b[9]
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.L3End = off + total
	p.L4Off = off + ihl
	p.PayloadOff = p.L4Off
	p.PayloadLen = p.L3End - p.L4Off
	p.Fragment = binary.BigEndian.Uint16(b[6:8])&(ipv4FlagMF|ipv4FragOffMask) != 0
	return OK
}

func parseIPv6(frame []byte, off int, p *Packet) Reason {
	if r := parseIPv6Header(frame, off, p); r != OK {
		return r
	}
	b := frame[off:]
	nh := b[6]
	l4 := 0
	if nh != ProtoUDP && nh != ProtoTCP && nh != ProtoICMPv6 {
		var frag bool
		var r Reason
		nh, l4, frag, r = UpperLayer(b[IPv6Len:IPv6Len+p.PayloadLen], nh)
		p.Proto = nh
		p.L4Off = off + IPv6Len + l4
		if r != OK {
			return r
		}
		if frag {
			p.Fragment = true
			p.PayloadOff = p.L4Off
			p.PayloadLen = p.L3End - p.L4Off
			return ReasonFragment
		}
	}
	p.Proto = nh
	p.L4Off = off + IPv6Len + l4
	return parseL4(frame[:p.L3End], p, true)
}

// parseIPv6Header checks the fixed IPv6 header at frame[off:] and fills p's
// L3 fields, with Proto the header's Next Header, L4Off right after the
// fixed header, PayloadOff = L4Off and PayloadLen the IPv6 payload length.
// p must be zero but for what the caller set.
func parseIPv6Header(frame []byte, off int, p *Packet) Reason {
	p.L3Off = off
	b := frame[off:]
	if len(b) < IPv6Len {
		return ReasonTruncatedIP
	}
	if b[0]>>4 != IPv6Version {
		return ReasonBadVersion
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if IPv6Len+plen > len(b) {
		return ReasonLengthExceedsFrame
	}
	p.IPVersion = IPv6Version
	p.TTL = b[7]
	p.Proto = b[6]
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	p.L3End = off + IPv6Len + plen
	p.L4Off = off + IPv6Len
	p.PayloadOff = p.L4Off
	p.PayloadLen = plen
	return OK
}

// parseUDP reads the UDP header at the start of b, which ends where the IP
// packet ends; p.L4Off is its offset in the frame.
func parseUDP(b []byte, p *Packet, v6 bool) Reason {
	if len(b) < UDPLen {
		return ReasonTruncatedL4
	}
	ul := int(binary.BigEndian.Uint16(b[4:6]))
	if ul < UDPLen || ul > len(b) {
		return ReasonBadUDPLength
	}
	if v6 && b[6] == 0 && b[7] == 0 {
		return ReasonUDPZeroChecksum
	}
	p.SrcPort = binary.BigEndian.Uint16(b[0:2])
	p.DstPort = binary.BigEndian.Uint16(b[2:4])
	p.PayloadOff = p.L4Off + UDPLen
	p.PayloadLen = ul - UDPLen
	return OK
}

// parseL4 reads the upper-layer header at p.L4Off in pkt, which ends at the
// IP packet's end.
func parseL4(pkt []byte, p *Packet, v6 bool) Reason {
	b := pkt[p.L4Off:]
	switch p.Proto {
	case ProtoUDP:
		return parseUDP(b, p, v6)
	case ProtoTCP:
		if len(b) < TCPMinLen {
			return ReasonTruncatedL4
		}
		doff := int(b[12]>>4) * 4
		if doff < TCPMinLen || doff > len(b) {
			return ReasonTruncatedL4
		}
		p.SrcPort = binary.BigEndian.Uint16(b[0:2])
		p.DstPort = binary.BigEndian.Uint16(b[2:4])
		p.PayloadOff = p.L4Off + doff
	case ProtoICMPv4:
		if v6 {
			p.PayloadOff = p.L4Off
			break
		}
		if len(b) < ICMPv4Len {
			return ReasonTruncatedL4
		}
		p.PayloadOff = p.L4Off + ICMPv4Len
	case ProtoICMPv6:
		if !v6 {
			p.PayloadOff = p.L4Off
			break
		}
		if len(b) < ICMPv6MinLen {
			return ReasonTruncatedL4
		}
		p.PayloadOff = p.L4Off + ICMPv6MinLen
	default:
		p.PayloadOff = p.L4Off
	}
	p.PayloadLen = len(pkt) - p.PayloadOff
	return OK
}

// ipv4HeaderSumOK reports whether an IPv4 header of len(h) bytes (IHL × 4,
// at least 20) sums to 0xffff, checksum field included. It sums 32-bit
// words into 64 bits, which cannot overflow for 15 words, and needs no byte
// swap: 0xffff reads the same in either order (RFC 1071 §2(B)).
func ipv4HeaderSumOK(h []byte) bool {
	_ = h[IPv4MinLen-1]
	s := uint64(binary.LittleEndian.Uint32(h[0:4])) + uint64(binary.LittleEndian.Uint32(h[4:8])) +
		uint64(binary.LittleEndian.Uint32(h[8:12])) + uint64(binary.LittleEndian.Uint32(h[12:16])) +
		uint64(binary.LittleEndian.Uint32(h[16:20]))
	for h = h[IPv4MinLen:]; len(h) >= 4; h = h[4:] {
		s += uint64(binary.LittleEndian.Uint32(h[0:4]))
	}
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return s == 0xffff
}

// parseIPv4Fast parses a UDP or TCP packet over IPv4 without options at
// frame[off:] (the caller checked the version/IHL byte) in one pass. It
// returns false, with p partly written, for anything else: a fragment,
// another protocol, a bad length or checksum, a packet too short for a TCP
// header's worth of bytes. On true every field but EtherType is set.
func parseIPv4Fast(frame []byte, off int, p *Packet) bool {
	ip := frame[off:]
	if len(ip) < IPv4MinLen+TCPMinLen {
		return false
	}
	b := ip[:IPv4MinLen+TCPMinLen]
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if total > len(ip) || binary.BigEndian.Uint16(b[6:8])&(ipv4FlagMF|ipv4FragOffMask) != 0 {
		return false
	}
	hdr, plen := UDPLen, int(binary.BigEndian.Uint16(b[24:26]))-UDPLen
	proto := b[9]
	if proto == ProtoTCP {
		hdr = int(b[32]>>4) * 4
		plen = total - IPv4MinLen - hdr
		if hdr < TCPMinLen {
			return false
		}
	} else if proto != ProtoUDP {
		return false
	}
	// UDP: 0 <= payload and UDP length <= IP payload; TCP: header within
	// the IP payload.
	if plen < 0 || hdr+plen > total-IPv4MinLen {
		return false
	}
	s := uint64(binary.LittleEndian.Uint32(b[0:4])) + uint64(binary.LittleEndian.Uint32(b[4:8])) +
		uint64(binary.LittleEndian.Uint32(b[8:12])) + uint64(binary.LittleEndian.Uint32(b[12:16])) +
		uint64(binary.LittleEndian.Uint32(b[16:20]))
	if fold35(s) != 0xffff {
		return false
	}
	// Every field is written (no zeroing pass first); the caller sets
	// EtherType.
	p.L3Off = off
	p.L3End = off + total
	p.L4Off = off + IPv4MinLen
	p.PayloadOff = off + IPv4MinLen + hdr
	p.PayloadLen = plen
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.SrcPort = binary.BigEndian.Uint16(b[20:22])
	p.DstPort = binary.BigEndian.Uint16(b[22:24])
	p.VLANID = 0
	p.Tagged = false
	p.IPVersion = IPv4Version
	p.Proto = proto
	p.TTL = b[8]
	p.Fragment = false
	return true
}
