package tundev

import (
	"net/netip"
	"time"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// ICMPRate limits the ICMP errors a PortDevice sends (PortConfig.ICMPRate)
// and those MultiQueueTUN.AnswerNoRoute sends, as Linux limits its own
// (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)): one bucket over all destinations
// and one per destination. Its fields (those of internal/icmprate.Config,
// which go doc does not list):
//
//	Rate         int           // messages per second, all destinations (Linux icmp_msgs_per_sec, 1000)
//	Burst        int           // messages at once, all destinations (icmp_msgs_burst, 50)
//	DestInterval time.Duration // between messages to one destination after a burst of 6 (icmp_ratelimit, 1 s)
//
// A zero field takes Linux's default (in parentheses); a negative one turns
// that limit off. The zero value is Linux's defaults.
type ICMPRate = icmprate.Config

// The ICMP errors a PortDevice sends about the transit packets it drops,
// as the Linux router with wg0 answers them:
//
//   - time exceeded (RFC 792, RFC 1812 §5.3.1; RFC 4443 §3.3) for a TTL or
//     hop limit of 0 or 1 (router.go);
//   - parameter problem (RFC 792, RFC 1812 §4.3.2.1 and §5.2.5; RFC 4443
//     §3.4, RFC 8200 §4.2) for the IPv4 options and IPv6 hop-by-hop
//     options Linux answers (header.OptionsError; Linux's
//     ip_options_compile and ip6_parse_tlv), before the hop;
//   - host unreachable / address unreachable (RFC 1812 §5.2.7.1; RFC 4443
//     §3.1 code 3) into the tunnel for a decrypted packet whose LAN next
//     hop did not resolve (no_neighbour), as Linux's neighbour layer
//     answers the packets it queued when resolution fails
//     (arp_error_report, ndisc_error_report);
//   - destination unreachable, beyond scope of source address (RFC 4443
//     §3.1 code 2) for an IPv6 packet from a link-local source that would
//     leave its link (RFC 4291 §2.5.6; Linux's ip6_forward, after the hop
//     limit's check; router.go).
//
// Each goes back the way the packet came: to the LAN host from our LAN
// address (icmpErrorLAN; to a link-local address from our link-local
// one), or into the tunnel from our tunnel address (icmpErrorTunnel,
// through the loop queue; to a link-local address from the tunnel
// address alone: icmpSources). Both spend the device's rate
// limiter (PortConfig.ICMPRate; Linux's icmp_ratemask holds both kinds)
// and are counted (PortStats.ICMPErrors, ICMPSuppressed). Host
// unreachable toward the LAN is unreach.go's; fragmentation needed / packet too big,
// never limited, mtu.go's (both through icmpErrorLAN).

// icmpKind is the error a PortDevice sends about a transit packet.
type icmpKind uint8

const (
	icmpTimeExceeded icmpKind = iota // time exceeded in transit, code 0
	icmpParamProblem                 // parameter problem (type 12 / type 4)
	icmpUnreachable                  // host unreachable (type 3 code 1) / address unreachable (type 1 code 3)
	icmpTooBig                       // fragmentation needed (type 3 code 4) / packet too big (type 2), never limited
	icmpBeyondScope                  // beyond scope of source address (ICMPv6 type 1 code 2; IPv6 only)
	icmpNoRoute                      // no route to destination (ICMPv6 type 1 code 0; IPv6 only)
)

// icmpError is an error about a transit packet: its kind, and for
// icmpParamProblem the pointer (bytes from the start of the offending IP
// header; only the low byte for IPv4) and the ICMPv6 code.
type icmpError struct {
	kind icmpKind
	code uint8
	ptr  uint32
	mtu  int // icmpTooBig's
}

// type6 is e's ICMPv6 type and code.
func (e icmpError) type6() (typ, code uint8) {
	switch e.kind {
	case icmpTimeExceeded:
		return header.ICMPv6TypeTimeExceeded, 0
	case icmpUnreachable:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeAddrUnreachable
	case icmpTooBig:
		return header.ICMPv6TypePacketTooBig, 0
	case icmpBeyondScope:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeBeyondScope
	case icmpNoRoute:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeNoRoute
	}
	return header.ICMPv6TypeParamProblem, e.code
}

// put writes into b the IP packet carrying e about the IP packet p (IPv4 or
// IPv6 by its version nibble) from src, of p's family; see header's Put
// functions for what b needs and the reasons they return (icmpBeyondScope
// and icmpNoRoute are IPv6's alone: none answers IPv4).
func (e icmpError) put(b []byte, src netip.Addr, p []byte) (int, header.Reason) {
	if p[0]>>4 == header.IPv4Version {
		switch e.kind {
		case icmpBeyondScope, icmpNoRoute:
			return 0, header.ReasonICMPNotAllowed
		case icmpTimeExceeded:
			return header.PutICMPv4TimeExceeded(b, src.As4(), p)
		case icmpUnreachable:
			return header.PutICMPv4HostUnreachable(b, src.As4(), p)
		case icmpTooBig:
			return header.PutICMPv4FragNeeded(b, src.As4(), p, uint16(min(e.mtu, 0xffff)))
		}
		return header.PutICMPv4ParamProblem(b, src.As4(), p, uint8(e.ptr))
	}
	switch e.kind {
	case icmpTimeExceeded:
		return header.PutICMPv6TimeExceeded(b, src.As16(), p)
	case icmpUnreachable:
		return header.PutICMPv6AddrUnreachable(b, src.As16(), p)
	case icmpTooBig:
		return header.PutICMPv6PacketTooBig(b, src.As16(), p, uint32(e.mtu))
	case icmpBeyondScope:
		return header.PutICMPv6BeyondScope(b, src.As16(), p)
	case icmpNoRoute:
		return header.PutICMPv6NoRoute(b, src.As16(), p)
	}
	return header.PutICMPv6ParamProblem(b, src.As16(), p, e.code, e.ptr)
}

// room returns b, the buffer an ICMP error is built in, cut to mtu bytes,
// the MTU of the link the error leaves by (the LAN's, LANMTU, or the
// tunnel's, PortConfig.MTU): Linux's __icmp_send holds an error's room to
// its route's MTU as well as to 576 bytes (header's limit, RFC 1812
// §4.3.2.3), so that the error is not fragmented or dropped on its way
// back; an IPv6 error (at most 1,280 bytes, RFC 4443 §2.4(c)) is cut the
// same, on a link where Linux would have no IPv6 (an MTU below 1,280). An
// MTU too small for the headers, the offending header and 8 of its data
// bytes leaves no error (header's ReasonBufferTooSmall), where Linux sends
// a shorter quote: a difference on links under 96 bytes.
func room(b []byte, mtu int) []byte { return b[:min(len(b), max(mtu, 0))] }

// optionsError is the parameter problem Linux answers the transit packet
// pkt with (header checked) when judge drops it for its options, or false
// when Linux drops it without an answer (header.OptionsError). A rare path.
func optionsError(pkt []byte) (icmpError, bool) {
	code, ptr, ok := header.OptionsError(pkt)
	return icmpError{kind: icmpParamProblem, code: code, ptr: ptr}, ok
}

// icmpAllowed reports whether the error e about pkt may go to pkt's source
// now: not when no error may answer pkt at all (RFC 1812 §4.3.2.7, RFC
// 4443 §2.4(e); asked first, as Linux's __icmp_send does, so that such
// packets spend no budget), else, for every kind but icmpTooBig, the rate
// limiter's answer, counting what it suppresses. For IPv6 the per-destination interval shrinks with the
// length of the route back, bits (icmprate.Shift6, as Linux's
// icmpv6_xrlim_allow): bits is called only then.
func (d *PortDevice) icmpAllowed(pkt []byte, e icmpError, bits func(netip.Addr) int) bool {
	var dst netip.Addr
	var shift uint
	if pkt[0]>>4 == header.IPv4Version {
		if header.ICMPv4ErrorAllowed(pkt) != header.OK {
			return false
		}
		dst = netip.AddrFrom4(header.IPv4(pkt).SrcBytes())
	} else {
		typ, code := e.type6()
		if header.ICMPv6ErrorAllowedCode(pkt, typ, code) != header.OK {
			return false
		}
		dst = netip.AddrFrom16(header.IPv6(pkt).SrcBytes())
		shift = icmprate.Shift6(bits(dst))
	}
	if e.kind == icmpTooBig {
		return true // path MTU discovery must not break (Linux's icmp_ratemask)
	}
	if d.icmpLimit.AllowShift(dst, int64(time.Since(d.epoch)), shift) {
		return true
	}
	d.ctr.icmpSuppressed.Add(1)
	return false
}

// icmpErrorLAN answers pkt, received from the LAN in a frame whose
// Ethernet header (and 802.1Q tag) is eth, with e where Linux routes an
// error to pkt's source: into the tunnel for a source a peer's allowed IPs
// take (icmpErrorTunnel), else to the MAC of the source's LAN next hop by
// PortConfig.Routes when its neighbour is known (the router a packet came
// through may not be the one the route back names, and the error about a
// spoofed source goes to the host that has the address), else to eth's
// Ethernet source (Linux would queue the error for the neighbour, or send
// it out of another interface), with eth's tag. It comes from our LAN
// address of the source's subnet (SetICMPSubnets), else of its family
// (PortConfig.ICMPSource4/6), to a link-local sender ICMPLinkLocal6
// (icmpSources.lanFrom); the route back is the LAN's (routeBits). Read's
// goroutine only (d.reply).
func (d *PortDevice) icmpErrorLAN(eth, pkt []byte, e icmpError) {
	src := header.SourceAddr(pkt)
	mac := header.MAC(eth[6:12])
	al := d.allowed.Load()
	var last lastRoute
	switch d.route(al, d.hosts.Load(), d.cfg.Routes.Table(), src, &last) {
	case routeTunnel:
		d.icmpErrorTunnel(pkt, e, al)
		return
	case routeLAN:
		if last.found && last.rt.IfIndex >= 0 {
			if m, ok := d.cfg.Neighbours.Lookup(last.rt.NextHop(src)); ok {
				mac = header.MAC(m)
			}
		}
	}
	from := d.icmpSrc.Load().lanFrom(pkt)
	if !from.IsValid() || from.Is4() != (pkt[0]>>4 == header.IPv4Version) || !d.icmpAllowed(pkt, e, d.routeBits) {
		return
	}
	b := d.reply
	l2 := copy(b, eth)
	copy(b[0:6], mac[:])
	copy(b[6:12], d.mac[:])
	n, r := e.put(room(b[l2:], d.LANMTU()), from, pkt)
	if r != header.OK {
		return
	}
	if d.SendFrame(b[:l2+n]) == nil {
		d.ctr.icmp.Add(1)
	}
}

// optionsErrorLAN answers pkt, from the LAN, dropped for its options
// (optionsError). A rare path.
//
//go:noinline
func (d *PortDevice) optionsErrorLAN(eth, pkt []byte) {
	if e, ok := optionsError(pkt); ok {
		d.icmpErrorLAN(eth, pkt, e)
	}
}

// icmpErrorTunnel answers pkt, a decrypted packet, with e back into the
// tunnel: the error, from our tunnel address of pkt's family
// (PortConfig.TunnelSource4/6, else the LAN one; to a link-local sender
// the tunnel address alone: icmpSources.tunnelFrom), is built in the loop
// queue and read by wireguard-go, which seals it to the peer whose allowed
// IPs hold pkt's source; the route back is that peer's prefix in al (a
// /128 without one). Safe for concurrent use (Write's goroutines).
func (d *PortDevice) icmpErrorTunnel(pkt []byte, e icmpError, al *bart.Table[uint8]) {
	if d.no6 && pkt[0]>>4 != header.IPv4Version {
		return // a tunnel without IPv6 (PortDropIPv6Off)
	}
	from := d.icmpSrc.Load().tunnelFrom(pkt)
	bits := func(dst netip.Addr) int {
		if al != nil {
			if b, ok := al.Lookup(dst); ok {
				return int(b)
			}
		}
		return 128
	}
	if !from.IsValid() || from.Is4() != (pkt[0]>>4 == header.IPv4Version) || !d.icmpAllowed(pkt, e, bits) {
		return
	}
	if d.loop.icmpError(d, pkt, from, e) {
		d.ctr.icmp.Add(1)
	}
}

// optionsErrorTunnel answers pkt, a decrypted packet dropped for its
// options, into the tunnel (optionsError). A rare path.
//
//go:noinline
func (d *PortDevice) optionsErrorTunnel(pkt []byte, al *bart.Table[uint8]) {
	if e, ok := optionsError(pkt); ok {
		d.icmpErrorTunnel(pkt, e, al)
	}
}
