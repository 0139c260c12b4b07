package arp

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/header"
)

// MLD wire constants (RFC 3810 §5, RFC 2710 §3; the Router Alert option
// of RFC 2711 §2.1, value 0 for MLD).
const (
	ICMPv6MLDQuery    = 130 // Multicast Listener Query (MLDv1 and MLDv2)
	ICMPv6MLDv1Report = 131 // RFC 2710 §3 Multicast Listener Report
	ICMPv6MLDv1Done   = 132 // RFC 2710 §3 Multicast Listener Done
	ICMPv6MLDv2Report = 143 // RFC 3810 §5.2 Version 2 Multicast Listener Report
	MLDHopLimit       = 1   // RFC 3810 §5, RFC 2710 §3

	// MLDv2 Multicast Address Record types (RFC 3810 §5.2.12).
	MLDModeIsExclude   = 2 // current state: listening to all sources
	MLDChangeToInclude = 3 // state change; with no sources: left the group
	MLDChangeToExclude = 4 // state change; with no sources: joined the group

	ipProtoHopByHop = 0
	// mldHBHLen is the Hop-by-Hop Options header of every MLD message we
	// send and the only one we read: next header, length 0 (8 bytes),
	// Router Alert (type 5, length 2, value 0) and a PadN of 2 bytes.
	mldHBHLen        = 8
	mldICMPOffset    = EthernetHeaderLen + IPv6HeaderLen + mldHBHLen // 62
	mldv2HeaderLen   = 8                                             // type, code, checksum, reserved, record count
	mldv2RecordLen   = 20                                            // type, aux len 0, 0 sources, group
	mldv1Len         = 24                                            // RFC 2710 §3: every MLDv1 message
	mldv2QueryMinLen = 28                                            // RFC 3810 §5.1: with no sources
	// MLDv1FrameLen is the length of an MLDv1 report or done frame.
	MLDv1FrameLen = mldICMPOffset + mldv1Len // 86
)

// MLDv2ReportLen returns the frame length of an MLDv2 report with n
// records of no sources.
func MLDv2ReportLen(n int) int { return mldICMPOffset + mldv2HeaderLen + n*mldv2RecordLen }

var (
	// allMLDv2Routers is ff02::16, where MLDv2 reports go (RFC 3810
	// §5.2.14).
	allMLDv2Routers = netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 15: 0x16})
	// allRouters is ff02::2, where MLDv1 Done goes (RFC 2710 §4).
	allRouters = netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 15: 0x02})
)

// putMLDHeaders writes the Ethernet, IPv6 and Hop-by-Hop headers of an
// MLD message of icmpLen bytes from src to dst (hop limit 1, Router
// Alert, RFC 3810 §5) into b, and returns the ICMPv6 part of b.
func putMLDHeaders(b []byte, ethSrc MAC, src, dst netip.Addr, icmpLen int) []byte {
	dmac := MulticastMAC(dst)
	copy(b[0:6], dmac[:])
	copy(b[6:12], ethSrc[:])
	binary.BigEndian.PutUint16(b[12:14], EtherTypeIPv6)
	ip := b[EthernetHeaderLen:]
	binary.BigEndian.PutUint32(ip[0:4], 6<<28)
	binary.BigEndian.PutUint16(ip[4:6], uint16(mldHBHLen+icmpLen))
	ip[6], ip[7] = ipProtoHopByHop, MLDHopLimit
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	hbh := ip[IPv6HeaderLen : IPv6HeaderLen+mldHBHLen]
	hbh[0], hbh[1] = ipProtoICMPv6, 0
	hbh[2], hbh[3], hbh[4], hbh[5] = 5, 2, 0, 0 // Router Alert: MLD
	hbh[6], hbh[7] = 1, 0                       // PadN, 0 bytes of data
	return b[mldICMPOffset : mldICMPOffset+icmpLen]
}

// mldChecksum fills in the checksum of the ICMPv6 message icmp sent from
// src to dst (RFC 4443 §2.3: over the pseudo-header of RFC 8200 §8.1,
// whose destination is the final one).
func mldChecksum(icmp []byte, src, dst netip.Addr) {
	s, d := src.As16(), dst.As16()
	icmp[2], icmp[3] = 0, 0
	sum := header.Checksum(icmp, header.PseudoHeaderChecksumBytes(ipProtoICMPv6, s[:], d[:], len(icmp)))
	binary.BigEndian.PutUint16(icmp[2:4], ^header.FoldChecksum(sum))
}

var errMLDAddr = errors.New("arp: MLD: the source must be IPv6, the groups IPv6 multicast")

// MarshalMLDv2Report writes into b an MLDv2 report (RFC 3810 §5.2) from
// ethSrc and src (a link-local address, or :: when the interface has
// none, §5.2.13) to ff02::16 (33:33:00:00:00:16), with one record of type
// recType and no sources per group, and returns the frame length
// (MLDv2ReportLen(len(groups))). It does not keep b and allocates nothing.
func MarshalMLDv2Report(b []byte, ethSrc MAC, src netip.Addr, recType uint8, groups []netip.Addr) (int, error) {
	l := MLDv2ReportLen(len(groups))
	if len(b) < l {
		return 0, ErrShortBuffer
	}
	if !src.Is6() {
		return 0, errMLDAddr
	}
	icmp := putMLDHeaders(b, ethSrc, src, allMLDv2Routers, l-mldICMPOffset)
	icmp[0], icmp[1], icmp[4], icmp[5] = ICMPv6MLDv2Report, 0, 0, 0
	binary.BigEndian.PutUint16(icmp[6:8], uint16(len(groups)))
	for i, g := range groups {
		if !g.Is6() || !g.IsMulticast() {
			return 0, errMLDAddr
		}
		r := icmp[mldv2HeaderLen+i*mldv2RecordLen:]
		r[0], r[1], r[2], r[3] = recType, 0, 0, 0
		a := g.As16()
		copy(r[4:20], a[:])
	}
	mldChecksum(icmp, src, allMLDv2Routers)
	return l, nil
}

// MarshalMLDv1 writes into b an MLDv1 Report (typ ICMPv6MLDv1Report, to
// group) or Done (ICMPv6MLDv1Done, to ff02::2) for group from ethSrc and
// src (RFC 2710 §3, §4; :: allowed by RFC 3590 §4), and returns the frame
// length, MLDv1FrameLen. It does not keep b and allocates nothing.
func MarshalMLDv1(b []byte, ethSrc MAC, src netip.Addr, typ uint8, group netip.Addr) (int, error) {
	if len(b) < MLDv1FrameLen {
		return 0, ErrShortBuffer
	}
	if !src.Is6() || !group.Is6() || !group.IsMulticast() {
		return 0, errMLDAddr
	}
	dst := group
	if typ == ICMPv6MLDv1Done {
		dst = allRouters
	}
	icmp := putMLDHeaders(b, ethSrc, src, dst, mldv1Len)
	clear(icmp[:8])
	icmp[0] = typ
	g := group.As16()
	copy(icmp[8:24], g[:])
	mldChecksum(icmp, src, dst)
	return MLDv1FrameLen, nil
}

// MLDQuery is a received Multicast Listener Query (RFC 3810 §5.1, RFC
// 2710 §3.6).
type MLDQuery struct {
	EthDst, EthSrc MAC
	Src, Dst       netip.Addr
	// Version is 1 for an MLDv1 query (24 bytes), 2 for an MLDv2 one
	// (28 bytes or more; RFC 3810 §8.1).
	Version int
	// MaxDelay is the Maximum Response Delay (RFC 3810 §5.1.3).
	MaxDelay time.Duration
	// Group is the unspecified address for a General Query, otherwise
	// the group asked about.
	Group netip.Addr
	// Sources is the number of sources of a Multicast Address and Source
	// Specific Query (MLDv2).
	Sources int
}

// routerAlertMLD reports whether opts, the options of a Hop-by-Hop Options
// header, hold a Router Alert option for MLD (RFC 2711: type 5, length 2,
// value 0), which a listener requires of a query (RFC 3810 §6.2).
func routerAlertMLD(opts []byte) bool {
	for i := 0; i < len(opts); {
		if opts[i] == 0 { // Pad1
			i++
			continue
		}
		if i+1 >= len(opts) || i+2+int(opts[i+1]) > len(opts) {
			return false
		}
		if opts[i] == 5 && opts[i+1] == 2 && opts[i+2] == 0 && opts[i+3] == 0 {
			return true
		}
		i += 2 + int(opts[i+1])
	}
	return false
}

// ParseMLDQuery parses an untagged Ethernet frame carrying an MLD query
// behind an 8-byte Hop-by-Hop Options header (where every querier puts its
// Router Alert, RFC 3810 §5) and checks it as a listener must: hop limit 1,
// a Router Alert option (RFC 3810 §6.2), a correct checksum, a link-local source (RFC 3810 §5.1.14 and §6.2;
// RFC 2710 §3: others are discarded), a length of 24 (MLDv1) or at least
// 28 with its sources (MLDv2). The Code is ignored (§5.1.1). Any other
// frame returns ReasonNotNeighbour. It reads only frame and allocates
// nothing.
func ParseMLDQuery(frame []byte) (MLDQuery, Reason) {
	var q MLDQuery
	if len(frame) < mldICMPOffset+1 || binary.BigEndian.Uint16(frame[12:14]) != EtherTypeIPv6 {
		return q, ReasonNotNeighbour
	}
	ip := frame[EthernetHeaderLen:]
	if ip[6] != ipProtoHopByHop || ip[IPv6HeaderLen] != ipProtoICMPv6 || ip[IPv6HeaderLen+1] != 0 ||
		frame[mldICMPOffset] != ICMPv6MLDQuery {
		return q, ReasonNotNeighbour
	}
	if ip[0]>>4 != 6 {
		return q, ReasonIPVersion
	}
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if plen > len(ip)-IPv6HeaderLen || plen < mldHBHLen+mldv1Len {
		return q, ReasonTruncated
	}
	if ip[7] != MLDHopLimit {
		return q, ReasonHopLimit
	}
	if !routerAlertMLD(ip[IPv6HeaderLen+2 : IPv6HeaderLen+mldHBHLen]) {
		return q, ReasonMLDRouterAlert
	}
	icmp := ip[IPv6HeaderLen+mldHBHLen : IPv6HeaderLen+plen]
	src, dst := ip[8:24], ip[24:40]
	sum := header.Checksum(icmp, header.PseudoHeaderChecksumBytes(ipProtoICMPv6, src, dst, len(icmp)))
	if header.FoldChecksum(sum) != 0xffff {
		return q, ReasonChecksum
	}
	q.EthDst, q.EthSrc = MAC(frame[0:6]), MAC(frame[6:12])
	q.Src, q.Dst = netip.AddrFrom16([16]byte(src)), netip.AddrFrom16([16]byte(dst))
	if !q.Src.IsLinkLocalUnicast() {
		return q, ReasonMLDSource
	}
	q.Group = netip.AddrFrom16([16]byte(icmp[8:24]))
	code := binary.BigEndian.Uint16(icmp[4:6])
	switch {
	case len(icmp) == mldv1Len:
		q.Version, q.MaxDelay = 1, time.Duration(code)*time.Millisecond
	case len(icmp) >= mldv2QueryMinLen:
		q.Version = 2
		q.Sources = int(binary.BigEndian.Uint16(icmp[26:28]))
		if len(icmp) < mldv2QueryMinLen+16*q.Sources {
			return q, ReasonTruncated
		}
		// RFC 3810 §5.1.3: from 32768 on, a floating-point value.
		ms := uint32(code)
		if code >= 0x8000 {
			ms = (uint32(code)&0xfff | 0x1000) << ((code>>12)&7 + 3)
		}
		q.MaxDelay = time.Duration(ms) * time.Millisecond
	default:
		return q, ReasonTruncated
	}
	return q, ReasonNone
}
