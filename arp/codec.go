package arp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/wgpio/wgpio/header"
)

// MAC is an Ethernet (EUI-48) address. A value, so that building and looking
// up frames allocates nothing.
type MAC [6]byte

// Broadcast is the Ethernet broadcast address.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IsMulticast reports whether m is a group address (the I/G bit, IEEE 802
// §8.2: the least significant bit of the first byte); broadcast is one.
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// String formats m as six colon-separated lowercase hex bytes.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// Wire constants (RFC 826; IEEE 802.3; RFC 8200 §3; RFC 4861 §4.3, §4.4,
// §4.6.1).
const (
	EthernetHeaderLen = 14     // destination, source, EtherType
	EtherTypeIPv4     = 0x0800 // IEEE 802 numbers
	EtherTypeARP      = 0x0806
	EtherTypeIPv6     = 0x86dd
	MinFrameLen       = 60 // Ethernet minimum without FCS; shorter frames are padded

	arpHardwareEthernet = 1 // RFC 826 ar$hrd: Ethernet (10Mb)
	ARPLen              = 28
	ARPFrameLen         = EthernetHeaderLen + ARPLen // 42, padded to MinFrameLen on build
	ARPRequest          = 1                          // RFC 826 ar$op
	ARPReply            = 2

	IPv6HeaderLen      = 40
	ipProtoICMPv6      = 58
	NDPHopLimit        = 255 // RFC 4861 §7.1.1: hop limit 255 proves the sender is on-link
	ICMPv6NS           = 135 // neighbour solicitation
	ICMPv6NA           = 136 // neighbour advertisement
	ndpMinLen          = 24  // RFC 4861 §7.1.1/§7.1.2: ICMP length ≥ 24
	ndpOptSourceLL     = 1   // RFC 4861 §4.6.1 source link-layer address
	ndpOptTargetLL     = 2   // RFC 4861 §4.6.1 target link-layer address
	ndpLLOptLen        = 8   // type, length (1 = 8 bytes), 6-byte MAC
	naFlagRouter       = 0x80
	naFlagSolicited    = 0x40
	naFlagOverride     = 0x20
	NDPFrameLen        = EthernetHeaderLen + IPv6HeaderLen + ndpMinLen + ndpLLOptLen // 86, with one link-layer option
	NDPFrameLenNoOpt   = EthernetHeaderLen + IPv6HeaderLen + ndpMinLen               // 78, DAD probe
	ndpICMPOffset      = EthernetHeaderLen + IPv6HeaderLen
	ndpTargetOffset    = ndpICMPOffset + 8
	ndpOptionsOffset   = ndpICMPOffset + ndpMinLen
	ipv6PayloadLenOffs = EthernetHeaderLen + 4
)

// ErrShortBuffer is returned by the builders when the output buffer cannot
// hold the frame.
var ErrShortBuffer = errors.New("arp: output buffer too short")

// Reason says why a frame was not used. ReasonNone means it was used.
// Every reason except ReasonNone and ReasonNotNeighbour is a drop counted by
// Responder.Drops.
type Reason uint8

// Reasons, in the order the checks run.
const (
	ReasonNone            Reason = iota
	ReasonNotNeighbour           // neither ARP nor ICMPv6 NS/NA: not ours to handle, pass it on
	ReasonTruncated              // shorter than its headers or its length fields say
	ReasonHardware               // ARP hardware/protocol type or lengths not Ethernet/IPv4
	ReasonOp                     // ARP operation neither request nor reply
	ReasonIPVersion              // IPv6 version field not 6
	ReasonHopLimit               // RFC 4861 §7.1: IP hop limit not 255
	ReasonCode                   // RFC 4861 §7.1: ICMP code not 0
	ReasonChecksum               // ICMPv6 checksum over the pseudo-header wrong
	ReasonTargetMulticast        // RFC 4861 §7.1: target address is multicast
	ReasonSourceMulticast        // RFC 4291 §2.7: IPv6 source address is multicast (Linux's ipv6_rcv drops it too)
	ReasonOption                 // RFC 4861 §7.1: an option of length 0 or past the end
	ReasonSolicitedFlag          // RFC 4861 §7.1.2: S flag set on a multicast NA
	ReasonUnspecifiedSrc         // RFC 4861 §7.1.1: NS from :: with an SLLA option or not to solicited-node
	ReasonSourceMAC              // a multicast/broadcast source or sender MAC
	ReasonNotForUs               // not addressed to us (wrong unicast destination)
	ReasonNotOurAddress          // asks for an address we do not own
	ReasonTentative              // asks for an address still under DAD
	ReasonMLDSource              // RFC 3810 §5.1.14: an MLD query from a source that is not link-local
	ReasonMLDRouterAlert         // RFC 3810 §6.2: an MLD query without the Router Alert option
	ReasonAddressConflict        // another host claims an address we own (RFC 5227 §2.4, RFC 4862 §5.4.4): counted in the address's conflicts too
	numReasons
)

var reasonNames = [numReasons]string{
	"none", "not-neighbour", "truncated", "hardware", "op", "ip-version",
	"hop-limit", "code", "checksum", "target-multicast", "source-multicast",
	"option", "solicited-flag", "unspecified-source", "source-mac",
	"not-for-us", "not-our-address", "tentative", "mld-source",
	"mld-router-alert", "address-conflict",
}

// String returns the reason's short name, as used in counters.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ARP is one ARP packet for Ethernet/IPv4 with the addresses of its Ethernet
// header (RFC 826). Addresses are IPv4.
type ARP struct {
	EthDst, EthSrc MAC
	Op             uint16 // ARPRequest or ARPReply
	SenderMAC      MAC
	SenderIP       netip.Addr
	TargetMAC      MAC
	TargetIP       netip.Addr
}

// ParseARP parses an untagged Ethernet II frame carrying ARP for
// Ethernet/IPv4. It checks the EtherType, hardware type 1, protocol type
// 0x0800, lengths 6 and 4 and the operation (RFC 826), and ignores padding
// after the 28 ARP bytes. It reads only frame and allocates nothing.
func ParseARP(frame []byte) (ARP, Reason) {
	var a ARP
	if len(frame) < EthernetHeaderLen {
		return a, ReasonTruncated
	}
	if binary.BigEndian.Uint16(frame[12:14]) != EtherTypeARP {
		return a, ReasonNotNeighbour
	}
	if len(frame) < ARPFrameLen {
		return a, ReasonTruncated
	}
	p := frame[EthernetHeaderLen:ARPFrameLen]
	if binary.BigEndian.Uint16(p[0:2]) != arpHardwareEthernet ||
		binary.BigEndian.Uint16(p[2:4]) != EtherTypeIPv4 || p[4] != 6 || p[5] != 4 {
		return a, ReasonHardware
	}
	a.Op = binary.BigEndian.Uint16(p[6:8])
	if a.Op != ARPRequest && a.Op != ARPReply {
		return a, ReasonOp
	}
	a.EthDst = MAC(frame[0:6])
	a.EthSrc = MAC(frame[6:12])
	a.SenderMAC = MAC(p[8:14])
	a.SenderIP = netip.AddrFrom4([4]byte(p[14:18]))
	a.TargetMAC = MAC(p[18:24])
	a.TargetIP = netip.AddrFrom4([4]byte(p[24:28]))
	return a, ReasonNone
}

// Marshal writes a as an Ethernet frame into b, padded with zeros to
// MinFrameLen, and returns the frame length (MinFrameLen). SenderIP and
// TargetIP must be IPv4. It does not keep b and allocates nothing.
func (a *ARP) Marshal(b []byte) (int, error) {
	if len(b) < MinFrameLen {
		return 0, ErrShortBuffer
	}
	if !a.SenderIP.Is4() || !a.TargetIP.Is4() {
		return 0, errors.New("arp: marshal: addresses must be IPv4")
	}
	copy(b[0:6], a.EthDst[:])
	copy(b[6:12], a.EthSrc[:])
	binary.BigEndian.PutUint16(b[12:14], EtherTypeARP)
	p := b[EthernetHeaderLen:]
	binary.BigEndian.PutUint16(p[0:2], arpHardwareEthernet)
	binary.BigEndian.PutUint16(p[2:4], EtherTypeIPv4)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], a.Op)
	copy(p[8:14], a.SenderMAC[:])
	s4, t4 := a.SenderIP.As4(), a.TargetIP.As4()
	copy(p[14:18], s4[:])
	copy(p[18:24], a.TargetMAC[:])
	copy(p[24:28], t4[:])
	clear(b[ARPFrameLen:MinFrameLen])
	return MinFrameLen, nil
}

// NDP is one neighbour solicitation or advertisement with the fields of its
// Ethernet and IPv6 headers (RFC 4861 §4.3, §4.4). LinkAddr is the source
// link-layer address option of an NS or the target link-layer address
// option of an NA, present when HasLinkAddr; other options are skipped.
type NDP struct {
	EthDst, EthSrc MAC
	Src, Dst       netip.Addr // IPv6 source and destination
	Type           uint8      // ICMPv6NS or ICMPv6NA
	Target         netip.Addr
	// NA flags (RFC 4861 §4.4); false in an NS.
	Router, Solicited, Override bool
	HasLinkAddr                 bool
	LinkAddr                    MAC
}

// ParseNDP parses an untagged Ethernet II frame carrying an IPv6 neighbour
// solicitation or advertisement and validates it as RFC 4861 §7.1.1 (NS)
// and §7.1.2 (NA) require: hop limit 255, ICMP code 0, a correct checksum
// over the IPv6 pseudo-header, ICMP length at least 24, a target that is not
// multicast, every option of non-zero length; for an NS from the
// unspecified address, a solicited-node multicast destination and no source
// link-layer address option; for an NA to a multicast destination, the
// Solicited flag clear. The IPv6 payload length is trusted over the frame
// length (Ethernet padding is ignored). IPv6 extension headers are not
// walked: ICMPv6 must follow the fixed header, as it does in every NS/NA
// that Linux and other stacks send; anything else (other IPv6 and ICMPv6
// traffic, ICMPv6 after extension headers) returns ReasonNotNeighbour. It reads only frame and allocates nothing.
func ParseNDP(frame []byte) (NDP, Reason) {
	var n NDP
	if len(frame) < EthernetHeaderLen {
		return n, ReasonTruncated
	}
	if binary.BigEndian.Uint16(frame[12:14]) != EtherTypeIPv6 {
		return n, ReasonNotNeighbour
	}
	if len(frame) < ndpICMPOffset {
		return n, ReasonTruncated
	}
	ip := frame[EthernetHeaderLen:]
	if ip[0]>>4 != 6 {
		return n, ReasonIPVersion
	}
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if plen > len(ip)-IPv6HeaderLen {
		return n, ReasonTruncated
	}
	if ip[6] != ipProtoICMPv6 {
		// Other traffic, or ICMPv6 behind extension headers (such as
		// MLD reports with their hop-by-hop option): not NS/NA.
		return n, ReasonNotNeighbour
	}
	icmp := ip[IPv6HeaderLen : IPv6HeaderLen+plen]
	if len(icmp) < 1 || (icmp[0] != ICMPv6NS && icmp[0] != ICMPv6NA) {
		return n, ReasonNotNeighbour
	}
	n.Type = icmp[0]
	if ip[7] != NDPHopLimit {
		return n, ReasonHopLimit
	}
	if len(icmp) < ndpMinLen {
		return n, ReasonTruncated
	}
	if icmp[1] != 0 {
		return n, ReasonCode
	}
	src, dst := ip[8:24], ip[24:40]
	sum := header.Checksum(icmp, header.PseudoHeaderChecksumBytes(ipProtoICMPv6, src, dst, plen))
	if header.FoldChecksum(sum) != 0xffff {
		return n, ReasonChecksum
	}
	n.EthDst = MAC(frame[0:6])
	n.EthSrc = MAC(frame[6:12])
	n.Src = netip.AddrFrom16([16]byte(src))
	n.Dst = netip.AddrFrom16([16]byte(dst))
	n.Target = netip.AddrFrom16([16]byte(icmp[8:24]))
	if n.Target.IsMulticast() {
		return n, ReasonTargetMulticast
	}
	if n.Src.IsMulticast() {
		return n, ReasonSourceMulticast
	}
	if n.Type == ICMPv6NA {
		n.Router = icmp[4]&naFlagRouter != 0
		n.Solicited = icmp[4]&naFlagSolicited != 0
		n.Override = icmp[4]&naFlagOverride != 0
	}
	sawSLLA := false
	want := uint8(ndpOptSourceLL)
	if n.Type == ICMPv6NA {
		want = ndpOptTargetLL
	}
	for opts := icmp[ndpMinLen:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return n, ReasonOption
		}
		l := int(opts[1]) * 8
		// RFC 4861 §4.6.1, RFC 2464 §8: over Ethernet the option is
		// one 8-byte unit; one of another length is skipped (an SLLA
		// of any length still counts for the unspecified-source rule).
		if opts[0] == ndpOptSourceLL {
			sawSLLA = true
		}
		if opts[0] == want && l == ndpLLOptLen && !n.HasLinkAddr {
			n.HasLinkAddr = true
			n.LinkAddr = MAC(opts[2:8])
		}
		opts = opts[l:]
	}
	if n.Type == ICMPv6NS && n.Src.IsUnspecified() && (sawSLLA || !isSolicitedNode(dst)) {
		return n, ReasonUnspecifiedSrc
	}
	if n.Type == ICMPv6NA && n.Dst.IsMulticast() && n.Solicited {
		return n, ReasonSolicitedFlag
	}
	return n, ReasonNone
}

// isSolicitedNode reports whether a (16 bytes) is in ff02::1:ff00:0/104
// (RFC 4291 §2.7.1).
func isSolicitedNode(a []byte) bool {
	return a[0] == 0xff && a[1] == 0x02 && binary.BigEndian.Uint64(a[2:10]) == 0 &&
		a[10] == 0 && a[11] == 1 && a[12] == 0xff
}

// SolicitedNode returns the solicited-node multicast address of the IPv6
// address a (RFC 4291 §2.7.1: ff02::1:ff00:0/104 and the low 24 bits of a).
func SolicitedNode(a netip.Addr) netip.Addr {
	s := [16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff}
	b := a.As16()
	copy(s[13:], b[13:])
	return netip.AddrFrom16(s)
}

// MulticastMAC returns the Ethernet address an IPv6 multicast group maps to
// (RFC 2464 §7: 33:33 and the low 32 bits of the group).
func MulticastMAC(group netip.Addr) MAC {
	b := group.As16()
	return MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// allNodes is ff02::1 (RFC 4291 §2.7.1).
var allNodes = netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 15: 0x01})

// Marshal writes n as an Ethernet/IPv6/ICMPv6 frame into b with hop limit
// 255 and the checksum filled in, and returns the frame length:
// NDPFrameLen with a link-layer address option (HasLinkAddr), otherwise
// NDPFrameLenNoOpt. Src, Dst and Target must be IPv6. It does not keep b and
// allocates nothing.
func (n *NDP) Marshal(b []byte) (int, error) {
	l := NDPFrameLenNoOpt
	if n.HasLinkAddr {
		l = NDPFrameLen
	}
	if len(b) < l {
		return 0, ErrShortBuffer
	}
	if !n.Src.Is6() || !n.Dst.Is6() || !n.Target.Is6() {
		return 0, errors.New("arp: marshal NDP: addresses must be IPv6")
	}
	copy(b[0:6], n.EthDst[:])
	copy(b[6:12], n.EthSrc[:])
	binary.BigEndian.PutUint16(b[12:14], EtherTypeIPv6)
	ip := b[EthernetHeaderLen:]
	binary.BigEndian.PutUint32(ip[0:4], 6<<28)
	plen := l - ndpICMPOffset
	binary.BigEndian.PutUint16(ip[4:6], uint16(plen))
	ip[6], ip[7] = ipProtoICMPv6, NDPHopLimit
	s, d, t := n.Src.As16(), n.Dst.As16(), n.Target.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	icmp := ip[IPv6HeaderLen : IPv6HeaderLen+plen]
	icmp[0], icmp[1], icmp[2], icmp[3] = n.Type, 0, 0, 0
	var flags byte
	if n.Type == ICMPv6NA {
		if n.Router {
			flags |= naFlagRouter
		}
		if n.Solicited {
			flags |= naFlagSolicited
		}
		if n.Override {
			flags |= naFlagOverride
		}
	}
	icmp[4], icmp[5], icmp[6], icmp[7] = flags, 0, 0, 0
	copy(icmp[8:24], t[:])
	if n.HasLinkAddr {
		icmp[24] = ndpOptSourceLL
		if n.Type == ICMPv6NA {
			icmp[24] = ndpOptTargetLL
		}
		icmp[25] = 1
		copy(icmp[26:32], n.LinkAddr[:])
	}
	sum := header.Checksum(icmp, header.PseudoHeaderChecksumBytes(ipProtoICMPv6, s[:], d[:], plen))
	binary.BigEndian.PutUint16(icmp[2:4], ^header.FoldChecksum(sum))
	return l, nil
}
