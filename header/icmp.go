package header

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
)

// ICMP types, codes and limits used here.
const (
	// ICMPv4TypeDestUnreachable with ICMPv4CodeFragNeeded is
	// "fragmentation needed and DF set" (RFC 792), whose bytes 6–7 carry
	// the next-hop MTU (RFC 1191 §4).
	ICMPv4TypeDestUnreachable = 3
	ICMPv4CodeFragNeeded      = 4
	// ICMPv6TypePacketTooBig is "packet too big" (RFC 4443 §3.2), code 0,
	// bytes 4–7 the MTU of the next-hop link.
	ICMPv6TypePacketTooBig = 2
	// ICMPv4TypeTimeExceeded with ICMPv4CodeTTLExceeded is "time to live
	// exceeded in transit" (RFC 792; RFC 1812 §5.3.1).
	ICMPv4TypeTimeExceeded = 11
	ICMPv4CodeTTLExceeded  = 0
	// ICMPv6TypeTimeExceeded with code 0 is "hop limit exceeded in
	// transit" (RFC 4443 §3.3).
	ICMPv6TypeTimeExceeded = 3

	// ICMPv4ErrorMaxLen is the largest ICMPv4 error datagram, IP header
	// included: 576 bytes (RFC 1812 §4.3.2.3).
	ICMPv4ErrorMaxLen = 576
	// ICMPv6ErrorMaxLen is the largest ICMPv6 error packet, IPv6 header
	// included: the minimum MTU, 1280 bytes (RFC 4443 §2.4(c)).
	ICMPv6ErrorMaxLen = IPv6MinMTU

	// ICMPv6Len is the header of an ICMPv6 error: type, code, checksum and
	// the 32-bit message-specific word (RFC 4443 §3).
	ICMPv6Len = 8

	// icmpErrorTOS is IP precedence "internetwork control" for ICMP
	// errors (RFC 1812 §4.3.2.5); as Linux's __icmp_send, the offending
	// packet's TOS bits (its tos & 0x1e, RT_TOS) are kept beside it.
	icmpErrorTOS = 0xc0
	icmpTOSMask  = 0x1e
	// icmpv4MinQuote is what RFC 792 requires at least: the IP header and
	// the first 64 bits of its data.
	icmpv4MinQuote = 8
)

// ICMPv4 is a view of an ICMPv4 message starting at its header. Accessors
// need len(m) >= ICMPv4Len.
type ICMPv4 []byte

// Type returns the type field.
func (m ICMPv4) Type() uint8 { return m[0] }

// Code returns the code field.
func (m ICMPv4) Code() uint8 { return m[1] }

// Checksum returns the checksum field.
func (m ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(m[2:4]) }

// NextHopMTU returns bytes 6–7, the next-hop MTU of a "fragmentation
// needed" message (RFC 1191 §4).
func (m ICMPv4) NextHopMTU() uint16 { return binary.BigEndian.Uint16(m[6:8]) }

// VerifyChecksum reports whether the checksum over the whole of m (the
// ICMP message up to the IP length; ICMPv4 has no pseudo-header, RFC 792)
// verifies.
func (m ICMPv4) VerifyChecksum() bool { return FoldChecksum(Checksum(m, 0)) == 0xffff }

// ICMPv6 is a view of an ICMPv6 message starting at its header. Accessors
// need len(m) >= ICMPv6Len (MTU) or ICMPv6MinLen (the others).
type ICMPv6 []byte

// Type returns the type field.
func (m ICMPv6) Type() uint8 { return m[0] }

// Code returns the code field.
func (m ICMPv6) Code() uint8 { return m[1] }

// Checksum returns the checksum field.
func (m ICMPv6) Checksum() uint16 { return binary.BigEndian.Uint16(m[2:4]) }

// MTU returns bytes 4–7, the MTU of a "packet too big" message.
func (m ICMPv6) MTU() uint32 { return binary.BigEndian.Uint32(m[4:8]) }

// VerifyChecksum reports whether the checksum over the pseudo-header
// (PseudoHeaderChecksum with ProtoICMPv6 and len(m), RFC 4443 §2.3) and m
// verifies.
func (m ICMPv6) VerifyChecksum(pseudo uint32) bool {
	return FoldChecksum(Checksum(m, pseudo)) == 0xffff
}

// isICMPv4Error reports whether an ICMPv4 type is an error message (RFC 1812
// §4.3.2.7 lists them: destination unreachable, source quench, redirect,
// time exceeded, parameter problem) or unknown: Linux's __icmp_send
// answers no type past NR_ICMP_TYPES (18, the last RFC 950 defines;
// "assume any unknown ICMP type is an error"), so neither do we.
func isICMPv4Error(t uint8) bool {
	switch t {
	case 3, 4, 5, 11, 12:
		return true
	}
	return t > icmpv4LastKnownType
}

// icmpv4LastKnownType is Linux's NR_ICMP_TYPES (include/uapi/linux/icmp.h).
const icmpv4LastKnownType = 18

// unicastSource4 reports whether a is a unique individual host address
// (RFC 1812 §4.3.2.7, §5.3.7): not 0.0.0.0/8, 127/8, multicast, class E
// or limited broadcast.
func unicastSource4(a [4]byte) bool {
	switch {
	case a[0] == 0, a[0] == 127, a[0] >= 224:
		return false
	}
	return true
}

// PutICMPv4FragNeeded writes, into b, an IPv4 packet from src to the source
// of offending carrying ICMPv4 "destination unreachable, fragmentation
// needed and DF set" (type 3, code 4, RFC 792) with nextHopMTU in bytes 6–7
// (RFC 1191 §4), quoting offending from its first byte: as much of it as
// fits in ICMPv4ErrorMaxLen bytes in all (RFC 1812 §4.3.2.3), never past
// its total length or len(b). It returns the bytes written (IP header, ICMP
// header and quote), both checksums set.
//
// offending is the IPv4 packet that was too big, starting at its header.
// The reply has TTL 64, precedence "internetwork control" (RFC 1812
// §4.3.2.5) with the offending packet's TOS bits, as Linux sends it, DF
// clear and an identification of its own (a process-wide counter from a
// random start: RFC 6864 §4); safe for concurrent use. b must hold at least the reply's headers, the
// offending IP header and 8 bytes of its data (RFC 792); otherwise
// ReasonBufferTooSmall. A malformed offending header gives the reason Parse
// would; RFC 1812 §4.3.2.7 rules give ReasonICMPNotAllowed: no error about
// an ICMP error, a non-initial fragment, a multicast or broadcast
// destination, or a source that is not one host. The caller checks what
// this function cannot see: link-layer broadcast, directed broadcast, rate
// limiting (RFC 1812 §4.3.2.8), and that the packet had DF set.
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv4FragNeeded(b []byte, src [4]byte, offending []byte, nextHopMTU uint16) (int, Reason) {
	return putICMPv4Error(b, src, offending, ICMPv4TypeDestUnreachable, ICMPv4CodeFragNeeded, uint32(nextHopMTU))
}

// PutICMPv4TimeExceeded writes, into b, ICMPv4 "time to live exceeded in
// transit" (type 11, code 0, RFC 792) from src to the source of offending,
// as a router sends it when it would forward a packet with TTL 0 (RFC 1812
// §5.3.1). Quote, reply header, buffer rules and the packets no error is
// sent about are those of PutICMPv4FragNeeded. offending is quoted as
// received (its TTL not decremented, as Linux quotes it).
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv4TimeExceeded(b []byte, src [4]byte, offending []byte) (int, Reason) {
	return putICMPv4Error(b, src, offending, ICMPv4TypeTimeExceeded, ICMPv4CodeTTLExceeded, 0)
}

// ICMPv4ErrorAllowed reports whether an ICMPv4 error may be sent about
// the IPv4 packet offending: OK, or the Reason PutICMPv4FragNeeded and
// PutICMPv4TimeExceeded return for it (a malformed header, or
// ReasonICMPNotAllowed by the rules of RFC 1812 §4.3.2.7 they list),
// without writing anything. A caller that rate-limits its errors asks it
// first, so that packets no error may answer spend none of the budget
// (Linux's __icmp_send applies these rules before icmp_global_allow).
//
// It allocates nothing and keeps no slice.
func ICMPv4ErrorAllowed(offending []byte) Reason {
	_, r := checkICMPv4Error(offending)
	return r
}

// checkICMPv4Error applies putICMPv4Error's rules to offending and returns
// how much of it an error may quote: its total length, within offending.
func checkICMPv4Error(offending []byte) (quote int, r Reason) {
	if len(offending) < IPv4MinLen {
		return 0, ReasonTruncatedIP
	}
	h := IPv4(offending)
	if h.Version() != IPv4Version {
		return 0, ReasonBadVersion
	}
	ihl := h.HeaderLen()
	if ihl < IPv4MinLen || ihl > len(offending) {
		return 0, ReasonBadIHL
	}
	total := h.TotalLength()
	if total < ihl {
		return 0, ReasonBadTotalLength
	}
	quote = min(total, len(offending))
	if h.FragmentOffset() != 0 {
		return 0, ReasonICMPNotAllowed
	}
	dst, osrc := h.DstBytes(), h.SrcBytes()
	if dst[0] >= 224 || !unicastSource4(osrc) {
		return 0, ReasonICMPNotAllowed
	}
	// An ICMP packet without its type octet gets no error either, as
	// Linux's __icmp_send cannot read the type (skb_header_pointer).
	if h.Protocol() == ProtoICMPv4 && (quote <= ihl || isICMPv4Error(offending[ihl])) {
		return 0, ReasonICMPNotAllowed
	}
	return quote, OK
}

// putICMPv4Error writes an ICMPv4 error of type typ and code code whose
// bytes 4–7 are word; see PutICMPv4FragNeeded.
func putICMPv4Error(b []byte, src [4]byte, offending []byte, typ, code uint8, word uint32) (int, Reason) {
	quote, r := checkICMPv4Error(offending)
	if r != OK {
		return 0, r
	}
	h := IPv4(offending)
	ihl, osrc := h.HeaderLen(), h.SrcBytes()
	const hdrs = IPv4MinLen + ICMPv4Len
	quote = min(quote, ICMPv4ErrorMaxLen-hdrs)
	if need := hdrs + min(quote, ihl+icmpv4MinQuote); len(b) < need {
		return 0, ReasonBufferTooSmall
	}
	quote = min(quote, len(b)-hdrs)
	n := hdrs + quote
	f := IPv4Fields{TOS: icmpErrorTOS | offending[1]&icmpTOSMask, ID: nextICMPID(), Protocol: ProtoICMPv4, Src: src, Dst: osrc}
	PutIPv4(b, &f, ICMPv4Len+quote)
	m := b[IPv4MinLen:n]
	m[0] = typ
	m[1] = code
	binary.BigEndian.PutUint16(m[2:4], 0)
	binary.BigEndian.PutUint32(m[4:8], word) // unused, or the next-hop MTU (RFC 1191 §4)
	copy(m[ICMPv4Len:], offending[:quote])
	binary.BigEndian.PutUint16(m[2:4], ^FoldChecksum(Checksum(m, 0)))
	return n, OK
}

// PutICMPv6PacketTooBig writes, into b, an IPv6 packet from src to the
// source of offending carrying ICMPv6 "packet too big" (type 2, code 0,
// RFC 4443 §3.2) with mtu, quoting offending from its first byte: as much
// as fits in ICMPv6ErrorMaxLen bytes in all (RFC 4443 §2.4(c)), never past
// its payload length or len(b). It returns the bytes written, the checksum
// set over the pseudo-header (RFC 4443 §2.3).
//
// offending is the IPv6 packet that was too big, starting at its fixed
// header. The reply has hop limit 64 and traffic class 0. b must hold at
// least the two headers and the offending fixed header; otherwise
// ReasonBufferTooSmall. RFC 4443 §2.4(e) gives ReasonICMPNotAllowed: no
// error about an ICMPv6 error message (found by walking the extension
// headers, see UpperLayer) or about a packet whose source is not one host
// (unspecified, loopback or multicast). A multicast destination is allowed:
// "packet too big" is the exception of §2.4(e.2). Rate limiting (§2.4(f)) is
// the caller's.
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6PacketTooBig(b []byte, src [16]byte, offending []byte, mtu uint32) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypePacketTooBig, 0, mtu)
}

// PutICMPv6TimeExceeded writes, into b, ICMPv6 "hop limit exceeded in
// transit" (type 3, code 0, RFC 4443 §3.3) from src to the source of
// offending, as a router sends it when it would forward a packet with hop
// limit 0 (RFC 8200 §3). The rules are PutICMPv6PacketTooBig's, except that
// no error is sent about a packet to a multicast destination (RFC 4443
// §2.4(e.3)). offending is quoted as received.
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6TimeExceeded(b []byte, src [16]byte, offending []byte) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypeTimeExceeded, 0, 0)
}

// ICMPv6ErrorAllowed reports whether an ICMPv6 error of type typ
// (ICMPv6TypePacketTooBig or ICMPv6TypeTimeExceeded) may be sent about the
// IPv6 packet offending: OK, or the Reason PutICMPv6PacketTooBig or
// PutICMPv6TimeExceeded returns for it (RFC 4443 §2.4(e)), without writing
// anything; see ICMPv4ErrorAllowed for why a rate-limiting caller asks it
// first.
//
// It allocates nothing and keeps no slice.
func ICMPv6ErrorAllowed(offending []byte, typ uint8) Reason {
	_, r := checkICMPv6Error(offending, typ, 0)
	return r
}

// checkICMPv6Error applies putICMPv6Error's rules to offending and returns
// how much of it an error may quote: the fixed header and its payload
// length, within offending.
//
// A multicast destination is allowed for "packet too big" and for
// "parameter problem" code 2 (RFC 4443 §2.4(e.2)), as Linux's icmp6_send
// allows them.
func checkICMPv6Error(offending []byte, typ, code uint8) (quote int, r Reason) {
	if len(offending) < IPv6Len {
		return 0, ReasonTruncatedIP
	}
	h := IPv6(offending)
	if h.Version() != IPv6Version {
		return 0, ReasonBadVersion
	}
	quote = min(IPv6Len+h.PayloadLength(), len(offending))
	sa := netip.AddrFrom16(h.SrcBytes())
	if sa.IsUnspecified() || sa.IsLoopback() || sa.IsMulticast() {
		return 0, ReasonICMPNotAllowed
	}
	if h.DstBytes()[0] == 0xff && typ != ICMPv6TypePacketTooBig &&
		(typ != ICMPv6TypeParamProblem || code != ICMPv6CodeUnrecognizedOption) {
		return 0, ReasonICMPNotAllowed // RFC 4443 §2.4(e.3)
	}
	// An error about an ICMPv6 error is not sent; a truncated extension
	// chain is quoted as it is (it is the offending packet's problem).
	// As Linux's is_ineligible (net/ipv6/icmp.c): the type of a first
	// fragment counts too, a non-first fragment's data is no header, and
	// an ICMPv6 packet without its type octet is taken for an error
	// unless it is a fragment.
	if proto, off, frag, r := UpperLayer(offending[IPv6Len:quote], h.NextHeader()); r == OK && proto == ProtoICMPv6 {
		at := IPv6Len + off
		if frag && binary.BigEndian.Uint16(offending[at-6:at-4])&^7 != 0 {
			return quote, OK // non-first: the Fragment header is 8 bytes before at
		}
		if at < quote && offending[at] < 128 || at >= quote && !frag {
			return 0, ReasonICMPNotAllowed
		}
	}
	return quote, OK
}

// putICMPv6Error writes an ICMPv6 error of type typ and code code whose
// bytes 4–7 are word; see PutICMPv6PacketTooBig.
func putICMPv6Error(b []byte, src [16]byte, offending []byte, typ, code uint8, word uint32) (int, Reason) {
	quote, r := checkICMPv6Error(offending, typ, code)
	if r != OK {
		return 0, r
	}
	osrc := IPv6(offending).SrcBytes()
	const hdrs = IPv6Len + ICMPv6Len
	if len(b) < hdrs+IPv6Len {
		return 0, ReasonBufferTooSmall
	}
	quote = min(quote, ICMPv6ErrorMaxLen-hdrs, len(b)-hdrs)
	n := hdrs + quote
	f := IPv6Fields{NextHeader: ProtoICMPv6, FlowLabel: errorFlowLabel(&src, &osrc, typ, code), Src: src, Dst: osrc}
	PutIPv6(b, &f, ICMPv6Len+quote)
	m := b[IPv6Len:n]
	m[0] = typ
	m[1] = code
	binary.BigEndian.PutUint16(m[2:4], 0)
	binary.BigEndian.PutUint32(m[4:8], word)
	copy(m[ICMPv6Len:], offending[:quote])
	ps := PseudoHeaderChecksumBytes(ProtoICMPv6, src[:], osrc[:], len(m))
	binary.BigEndian.PutUint16(m[2:4], ^FoldChecksum(Checksum(m, ps)))
	return n, OK
}

// flowSeed keys errorFlowLabel's hash for the process, as Linux keys its
// flow hashes at boot: a label is not predictable from the addresses.
var flowSeed = maphash.MakeSeed()

// errorFlowLabel is the flow label of an ICMPv6 error of type typ and
// code code from src to dst: a keyed hash of the addresses, the protocol,
// the type and the code (the flow Linux hashes for it: an ICMPv6 flow's
// "ports" are its type and code), the same for every such error between
// them, never 0. RFC 6437 §3 asks a source to label its flows, and Linux
// labels its ICMPv6 errors so (ip6_make_flowlabel, the auto_flowlabels
// default): a path that balances by flow label (ECMP, RFC 6438) keeps
// them on one path.
func errorFlowLabel(src, dst *[16]byte, typ, code uint8) uint32 {
	var h maphash.Hash
	h.SetSeed(flowSeed)
	h.Write(src[:])
	h.Write(dst[:])
	h.Write([]byte{ProtoICMPv6, typ, code})
	v := h.Sum64()
	if l := uint32(v^v>>32) & 0xfffff; l != 0 {
		return l
	}
	return 1
}

// icmpID is the identification of the last ICMPv4 error written, from a
// random start: an error leaves with DF clear and may be fragmented, so
// its ID must not repeat soon between the same addresses (RFC 6864 §4;
// they were all 0). One counter for the process: errors are rate-limited,
// far below 65,536 a reassembly timeout.
var icmpID atomic.Uint32

func init() { icmpID.Store(rand.Uint32()) }

// nextICMPID returns the identification of the next ICMPv4 error.
func nextICMPID() uint16 { return uint16(icmpID.Add(1)) }
