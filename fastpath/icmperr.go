package fastpath

import (
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// The ICMP errors a worker sends, and where they go. A worker answers a
// transit packet it drops as the Linux router it replaces answers it:
//
//   - time exceeded (RFC 1812 §5.3.1, RFC 4443 §3.3; router.go);
//   - fragmentation needed / packet too big (RFC 1812 §4.3.2.7 via RFC
//     1191, RFC 4443 §3.2; never rate-limited: Linux leaves them out of
//     icmp_ratemask, and path MTU discovery must not break), quoting the
//     packet as it arrived (putICMPError puts the hop back);
//   - host unreachable / address unreachable (RFC 792, RFC 1812
//     §5.2.7.1; RFC 4443 §3.1 code 3) for a packet whose destination no
//     peer's allowed IPs hold (no_route: the prefixes of a removed peer,
//     which still route to the gateway) or whose peer has no endpoint
//     (no_endpoint), what Linux's WireGuard answers (wg_xmit, -ENOKEY and
//     -EDESTADDRREQ, through icmp_ndo_send), after the router's hop and
//     MTU checks (ip_forward runs before the device's transmit: the quote
//     shows the TTL already lowered), and for a decrypted packet whose LAN
//     next hop never answered ARP or neighbour discovery (no_neighbour,
//     after neighbourWaitMax), as Linux's neighbour layer answers the
//     packets it queued (arp_error_report, ndisc_error_report);
//   - parameter problem (RFC 792, RFC 1812 §4.3.2.1 and §5.2.5; RFC 4443
//     §3.4, RFC 8200 §4.2) for the IPv4 options and IPv6 hop-by-hop
//     options Linux answers (optionsError), before the hop (Linux checks
//     them as it receives the packet, before it forwards it);
//   - destination unreachable, beyond scope of source address (RFC 4443
//     §3.1 code 2) for an IPv6 packet from a link-local source that would
//     leave the link it came from (RFC 4291 §2.5.6; Linux's ip6_forward,
//     after the hop limit's check): scope.go;
//   - destination unreachable, no route to destination (RFC 4443 §3.1
//     code 0) for a LAN host's IPv6 packet while the tunnel MTU is below
//     1280 (ipv6_off, unreach.go), as Linux answers it once it removed
//     the routes into such a wg0 (ip6_pkt_drop); no ICMPv6 error goes
//     into such a tunnel (icmpTunnel).
//
// Each goes back the way the packet came, from the address Linux would
// use (icmpSources: the interface it leaves by; to a link-local address,
// the same interface's address of that scope): to a LAN host from our
// LAN address (icmpToLAN), to a peer into the tunnel from our tunnel
// address (icmpTunnel), to the host itself through the exception
// interface (icmpToHost). All but the MTU errors spend the engine's rate
// limiter (Config.ICMPRate, ICMPBurst, ICMPDestInterval: Linux's
// icmp_msgs_per_sec, icmp_msgs_burst, icmp_ratelimit and ratemask) and
// are counted (QueueStats.ICMP sent, ICMPSuppressed held back), but for
// one: an error about a packet the host's kernel forwarded, to a LAN host
// whose MAC is not known yet, spends the budget and is not sent, counted
// as neither (icmpKernel: no frame holds the sender's MAC); the packet's
// drop is counted by its own reason either way.

// icmpKind is the error a worker sends.
type icmpKind uint8

const (
	icmpTimeExceeded icmpKind = iota // time exceeded in transit, code 0
	icmpTooBig                       // fragmentation needed (type 3 code 4) / packet too big (type 2)
	icmpUnreachable                  // host unreachable (type 3 code 1) / address unreachable (type 1 code 3)
	icmpParamProblem                 // parameter problem (type 12 / type 4)
	icmpBeyondScope                  // beyond scope of source address (ICMPv6 type 1 code 2; IPv6 only)
	icmpNoRoute                      // no route to destination (ICMPv6 type 1 code 0; IPv6 only)
)

// icmpError is an ICMP error about a packet: its kind, and for
// icmpTooBig the MTU, for icmpParamProblem the pointer (bytes from the
// start of the offending IP header; only the low byte for IPv4) and the
// ICMPv6 code.
type icmpError struct {
	kind icmpKind
	code uint8 // ICMPv6 parameter problem's code (header.ICMPv6Code...)
	ptr  uint32
	mtu  int
}

// limited reports whether e spends the rate limiter's budget: every error
// but fragmentation needed / packet too big (Linux's icmp_ratemask,
// 0x1818 by default, and icmpv6's "0-1,3-127").
func (e icmpError) limited() bool { return e.kind != icmpTooBig }

// type6 is e's ICMPv6 type and code.
func (e icmpError) type6() (typ, code uint8) {
	switch e.kind {
	case icmpTimeExceeded:
		return header.ICMPv6TypeTimeExceeded, 0
	case icmpTooBig:
		return header.ICMPv6TypePacketTooBig, 0
	case icmpUnreachable:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeAddrUnreachable
	case icmpBeyondScope:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeBeyondScope
	case icmpNoRoute:
		return header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeNoRoute
	}
	return header.ICMPv6TypeParamProblem, e.code
}

// putICMPError writes into b the IP packet carrying e about the IP packet
// p (IPv4 or IPv6 by its version nibble) from src, of p's family; see
// header's Put functions for what b needs and the reasons they return
// (icmpBeyondScope and icmpNoRoute are IPv6's alone: none answers IPv4).
// For icmpTooBig, p is a transit packet the worker drops for its size
// after it took the hop (router.go): the hop is put back in p first, so
// that the error quotes the packet as it arrived, as Linux's ip_forward
// and ip6_forward check the MTU before they lower the TTL.
func putICMPError(b []byte, src netip.Addr, p []byte, e icmpError) (int, header.Reason) {
	if e.kind == icmpTooBig && routerWork {
		header.RestoreHop(p)
	}
	if p[0]>>4 == header.IPv4Version {
		s := src.As4()
		switch e.kind {
		case icmpTimeExceeded:
			return header.PutICMPv4TimeExceeded(b, s, p)
		case icmpTooBig:
			return header.PutICMPv4FragNeeded(b, s, p, uint16(min(e.mtu, 0xffff)))
		case icmpUnreachable:
			return header.PutICMPv4HostUnreachable(b, s, p)
		case icmpBeyondScope, icmpNoRoute:
			return 0, header.ReasonICMPNotAllowed
		}
		return header.PutICMPv4ParamProblem(b, s, p, uint8(e.ptr))
	}
	s := src.As16()
	switch e.kind {
	case icmpTimeExceeded:
		return header.PutICMPv6TimeExceeded(b, s, p)
	case icmpTooBig:
		return header.PutICMPv6PacketTooBig(b, s, p, uint32(e.mtu))
	case icmpUnreachable:
		return header.PutICMPv6AddrUnreachable(b, s, p)
	case icmpBeyondScope:
		return header.PutICMPv6BeyondScope(b, s, p)
	case icmpNoRoute:
		return header.PutICMPv6NoRoute(b, s, p)
	}
	return header.PutICMPv6ParamProblem(b, s, p, e.code, e.ptr)
}

// icmpVia is the way an error leaves: toward a LAN host, into the tunnel
// to a peer, to the host itself, or out of the WAN (icmpWAN).
type icmpVia uint8

const (
	viaLAN icmpVia = iota
	viaTunnel
	viaHost
	viaWAN
)

// icmpAllowed reports whether the error e about the IP packet p may go to
// its source now, by way of via: not when no error may answer p at all
// (header's RFC 1812 §4.3.2.7 / RFC 4443 §2.4(e) rules, asked first, as
// Linux's __icmp_send does, so that such packets, an ICMP error flood
// with TTL 1, spend none of the budget and are not counted as
// suppressed), else, for a limited kind, the engine's shared rate
// limiter's answer, counting what it suppresses. An error to the host
// itself spends the global budget only (Linux's icmpv4_xrlim_allow and
// icmpv6_xrlim_allow let a loopback route through); an IPv6 error's
// per-destination interval shrinks with the length of the route back, as
// Linux's icmpv6_xrlim_allow shrinks it (icmprate.Shift6): the LAN
// resolver's route toward the LAN host (a /64 when it has none to tell),
// the allowed-IPs prefix holding the peer's address.
func (w *worker) icmpAllowed(p []byte, e icmpError, via icmpVia, now int64) bool {
	var dst netip.Addr
	if p[0]>>4 == header.IPv4Version {
		if header.ICMPv4ErrorAllowed(p) != header.OK {
			return false
		}
		dst = netip.AddrFrom4(header.IPv4(p).SrcBytes())
	} else {
		typ, code := e.type6()
		if header.ICMPv6ErrorAllowedCode(p, typ, code) != header.OK {
			return false
		}
		dst = netip.AddrFrom16(header.IPv6(p).SrcBytes())
	}
	if !e.limited() {
		return true
	}
	var ok bool
	switch {
	case via == viaHost:
		ok = w.e.icmpLimit.AllowGlobal(now)
	case dst.Is4():
		ok = w.e.icmpLimit.Allow(dst, now)
	default:
		ok = w.e.icmpLimit.AllowShift(dst, now, icmprate.Shift6(w.routeBits6(dst, via)))
	}
	if !ok {
		w.c.icmpSuppressed.Add(1)
	}
	return ok
}

// routeBits6 is the prefix length of the route an IPv6 error to dst
// leaves by (icmpAllowed).
func (w *worker) routeBits6(dst netip.Addr, via icmpVia) int {
	if via == viaTunnel {
		if pfx, _, ok := w.e.routes.Load().t.LookupPrefixLPM(netip.PrefixFrom(dst, 128)); ok {
			return pfx.Bits()
		}
		return 128
	}
	if l := w.e.lanLens; l != nil {
		if bits, _, _ := l.PrefixLen(dst); bits >= 0 {
			return bits
		}
	}
	return 64
}

// icmpErrorToLAN answers the IP packet in f (its data from the IP header,
// the Ethernet header of l2 bytes still in the headroom), which came from
// the LAN, with e where Linux routes an error to its source: into the
// tunnel for a source a peer's allowed IPs take (icmpTunnel), else toward
// the LAN next hop of the source (its MAC from the worker's cache or
// Config.LANResolver: the router it came through may not be the one
// the route back names, and a spoofed source's error goes to the host
// that has the address, not to the sender). Where that MAC is not known
// yet, or the source's route leads out of another interface, the error
// goes to the frame's Ethernet source (Linux would queue it for the
// neighbour, or send it out of that interface). The caller drops and
// counts f.
func (w *worker) icmpErrorToLAN(f *dataplane.Frame, l2 int, e icmpError, now int64) {
	p := f.Data()
	src := header.SourceAddr(p)
	to := w.lanRoute(w.e.routes.Load(), src, now)
	if to == routeTunnel {
		w.icmpTunnel(p, e, now)
		return
	}
	// Allowed first, as Linux asks its budget before the route and
	// neighbour work: a flood of such packets from ever new sources
	// costs no resolution (a lock, an ARP request) each.
	from, ok := w.lanErrorFrom(p, e, now)
	if !ok {
		return
	}
	if to == routeLAN {
		if mac, ok := w.lanNeighbour(src, now); ok {
			w.lanSend(p, header.MAC(mac), from, e)
			return
		}
	}
	var srcMAC header.MAC
	// The Ethernet source of the offending frame is still in the headroom.
	if f.Headroom() >= l2 {
		var full dataplane.Frame = *f
		full.Prepend(l2)
		srcMAC = header.MAC(full.Data()[6:12])
	}
	w.lanSend(p, srcMAC, from, e)
}

// lanErrorFrom is the source of e about the IP packet p toward the LAN
// (our LAN address of now: icmpSources.lanFrom, the link-local one to a
// link-local source), and whether e may be sent: not where RFC 1812
// §4.3.2.7 / RFC 4443 §2.4 forbid it, past the rate limit, or without a
// LAN address of the packet's family.
func (w *worker) lanErrorFrom(p []byte, e icmpError, now int64) (netip.Addr, bool) {
	from := w.e.icmpSrc.Load().lanFrom(p)
	return from, from.IsValid() && w.icmpAllowed(p, e, viaLAN, now)
}

// lanSend sends e about the IP packet p to its source on the LAN, at the
// Ethernet address mac, from from (lanErrorFrom).
func (w *worker) lanSend(p []byte, mac header.MAC, from netip.Addr, e icmpError) {
	w.sendICMP(w.lanTX, w.lanL2, w.lanVLAN, mac, header.MAC(w.lanMAC), p, from, e)
}

// sendICMP sends e about the IP packet p, from from, in a frame of tx's
// pool to the Ethernet address dst from src, with an l2-byte Ethernet
// header (tagged with vlan, 0: untagged), and counts it sent once the
// port took it (else ring_full; no_buffer without a frame).
func (w *worker) sendICMP(tx dataplane.TX, l2 int, vlan uint16, dst, src header.MAC, p []byte, from netip.Addr, e icmpError) {
	reply := w.fwd.reply[:]
	if tx.Alloc(reply) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	r := &reply[0]
	r.SetLen(l2 + header.ICMPv6ErrorMaxLen)
	b := r.Data()
	et := uint16(header.EtherTypeIPv6)
	if p[0]>>4 == header.IPv4Version {
		et = header.EtherTypeIPv4
	}
	putEthernet(b, dst, src, vlan, et)
	n, reason := putICMPError(b[l2:], from, p, e)
	if reason != header.OK {
		tx.Free(reply)
		return
	}
	r.SetLen(l2 + n)
	if w.transmit(tx, reply) == 1 { // else counted ring_full
		w.c.icmp.Add(1)
	}
}

// icmpTunnel answers the IP packet p, which came out of the tunnel, with e
// back into the tunnel, from our tunnel address of its family, or our LAN
// address when we have no tunnel address (Linux's choice too: the address
// of the interface the answer leaves by, else the host's primary one; to
// a link-local source the tunnel address alone: icmpSources.tunnelFrom),
// sealed to the peer whose allowed IPs hold p's source (sendInner). No
// ICMPv6 error goes into a tunnel without IPv6 (Engine.no6), as none
// goes into Linux's wg0 below 1280.
func (w *worker) icmpTunnel(p []byte, e icmpError, now int64) {
	if p[0]>>4 != header.IPv4Version && w.e.no6() {
		return // a tunnel without IPv6 (ipv6_off)
	}
	from := w.e.icmpSrc.Load().tunnelFrom(p)
	if !from.IsValid() || !w.icmpAllowed(p, e, viaTunnel, now) {
		return
	}
	n, r := putICMPError(w.fwd.icmp[:], from, p, e)
	if r != header.OK {
		return
	}
	w.c.icmp.Add(1)
	w.sendInner(w.fwd.icmp[:n], false, now)
}

// icmpKernel answers p, a packet the exception interface handed over
// (Engine.SendTunnel: the host's own, or one its kernel forwarded into
// wg0, as for a removed peer's prefix whose route the exception TUN
// keeps), with e as Linux's wg0 would: a packet from a LAN host goes back
// to it from our LAN address, as the error Linux routes out of the LAN
// (its next hop's MAC from the worker's cache or Config.LANResolver; none
// is sent while that MAC is unknown, its resolution asked for: Linux
// would queue the error for the neighbour, the next one goes), a packet
// from a peer's side (a source its allowed IPs hold, as lanRoute routes
// it) into the tunnel from our tunnel address (icmpTunnel), the host's
// own to the host (icmpToHost), the rest out of the WAN from our WAN
// address (icmpWAN).
func (w *worker) icmpKernel(p []byte, e icmpError, now int64) {
	src := header.SourceAddr(p)
	rt := w.e.routes.Load()
	if isOwn(rt, src) {
		w.icmpToHost(p, e, now)
		return
	}
	switch w.lanRoute(rt, src, now) {
	case routeLAN:
		from, ok := w.lanErrorFrom(p, e, now)
		if !ok {
			return
		}
		if mac, ok := w.lanNeighbour(src, now); ok {
			w.lanSend(p, header.MAC(mac), from, e)
		}
		return
	case routeTunnel:
		// A peer's packet: the error goes into the tunnel from
		// our tunnel address, as Linux routes it into wg0,
		// under the per-destination limit.
		w.icmpTunnel(p, e, now)
		return
	}
	w.icmpWAN(p, e, now)
}

// icmpToHost answers p, a packet of the host's own that the exception
// interface handed over (Config.Exception must be set), with e back to the
// host through Config.Exception. Linux's error comes from the host's own
// address to itself over the loopback; one written into the exception
// interface from a local address would be a martian there, so it comes
// from p's destination, the address the host could not reach (the socket
// sees the same error: EHOSTUNREACH). Limited by the global budget only,
// as Linux limits an error to a local address.
func (w *worker) icmpToHost(p []byte, e icmpError, now int64) {
	if w.e.cfg.Exception == nil || !w.icmpAllowed(p, e, viaHost, now) {
		return
	}
	var from netip.Addr
	if p[0]>>4 == header.IPv4Version {
		from = netip.AddrFrom4(header.IPv4(p).DstBytes())
	} else {
		from = netip.AddrFrom16(header.IPv6(p).DstBytes())
	}
	n, r := putICMPError(w.fwd.icmp[:], from, p, e)
	if r != header.OK {
		return
	}
	w.c.icmp.Add(1)
	w.hostOne[0] = w.fwd.icmp[:n]
	w.e.cfg.Exception(w.id, w.hostOne[:])
	w.hostOne[0] = nil
}
