package tundev

import (
	"net/netip"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/header"
)

// A PortDevice forwards as the Linux router with wg0 it stands in for
// (RFC 1812 §5.3.1, RFC 8200 §3), in both directions: LAN → tunnel (Read
// hands wireguard-go the packet) and tunnel → LAN (wireguard-go's Write).
// Per transit packet, in Linux's order (ip_rcv_options, then route input,
// then ip_forward / ip6_forward):
//
//   - options Linux does not forward are dropped (ip_options,
//     header.TransitOptions), addresses no router forwards too (martian,
//     multicast: header.TransitAddrs), fastpath's code for both; an IPv6
//     link-local source is judged after the hop limit (below), as
//     Linux's ip6_forward judges it;
//   - a packet dropped for its options is answered with parameter problem
//     where Linux answers it (header.OptionsError), a TTL or hop limit of
//     0 or 1 is dropped (ttl_exceeded) and answered with time exceeded
//     (RFC 792, RFC 4443 §3.3): to the packet's source, rate-limited as
//     Linux limits it (PortConfig.ICMPRate, internal/icmprate), to the LAN
//     host by its Ethernet address, or into the tunnel by handing
//     wireguard-go the error to read (loop.go), from
//     PortConfig.TunnelSource4/6 (icmperr.go);
//   - a packet from an IPv6 link-local source (RFC 4291 §2.5.6) is then
//     dropped (martian) and answered with destination unreachable,
//     beyond scope of source address (RFC 4443 §3.1 code 2), as Linux's
//     ip6_forward answers it, but for a decrypted one going back into the
//     tunnel (peer to peer), which Linux forwards: a packet leaving by the
//     interface it came in by is not judged by its source there (seen on
//     Linux 6.18);
//   - otherwise the TTL / hop limit drops by one, once (header.DecrementHop),
//     and a TCP SYN's MSS is clamped (PortConfig.MSSClamp4/6,
//     header.ClampMSS).
//
// A decrypted packet whose destination a peer's allowed IPs hold
// (SetAllowedIPs) by a longer prefix than the LAN's route toward it goes
// back to wireguard-go's read side (loop.go), as Linux's wg0 sends it back
// out: peer to peer (hub and spoke), the peer it came from included. One
// to the host's own addresses (SetHostAddrs), which Linux delivers
// locally, is dropped as local: the device has no way into the host. With
// PortConfig.LANIndex, one whose route (the longest prefix of the host's
// main table, Linux's lookup) leads out of another interface than the LAN,
// sends nowhere or is not in the table, which Linux's wg0 hands to the
// host's kernel to forward, is dropped as off_lan for the same reason,
// after the TTL check (time exceeded answers it as Linux's forwarding
// would) and never sent to the LAN: the fast path's rule
// (fastpath/hairpin.go) without its exception TUN.

// tunnelRouteMetric6 is the metric of an IPv6 route into wg0 (Linux's
// default for a route added without one, IP6_RT_PRIO_USER); a LAN route of
// the same prefix and a lower metric wins (the kernel's own on-link /64
// has 256). An IPv4 route into wg0 has metric 0 and wins ties.
const tunnelRouteMetric6 = 1024

// SetAllowedIPs replaces the prefixes Write sends back to wireguard-go
// instead of the LAN: every peer's allowed IPs (gateway/compatgw keeps
// them in step with wireguard-go's configuration). A /0 has no route into
// wg0 (README, "Behaviour as a router") and is left out. The table is
// published whole: Write pays one atomic load per call and one
// allocation-free trie lookup per packet. Safe for concurrent use;
// O(len(allowed)) per call.
func (d *PortDevice) SetAllowedIPs(allowed []netip.Prefix) {
	d.allowedMu.Lock()
	defer d.allowedMu.Unlock()
	t := new(bart.Table[uint8])
	for _, p := range allowed {
		if p.Bits() > 0 {
			t.Insert(p.Masked(), uint8(p.Bits()))
		}
	}
	d.allowed.Store(t)
}

// UpdateAllowedIPs changes SetAllowedIPs' set by a difference: the
// prefixes of del leave it, then those of add enter it (a prefix in both
// stays; a /0 is left out, as by SetAllowedIPs). The table is copied
// along the changed paths only (bart's persistent insert and delete) and
// published whole, so that a change costs O(len(add)+len(del)), not
// O(the set): gateway/compatgw follows a `wg set` with it. Before any
// SetAllowedIPs it starts from an empty set. Safe for concurrent use
// with Write and SetAllowedIPs.
func (d *PortDevice) UpdateAllowedIPs(add, del []netip.Prefix) {
	d.allowedMu.Lock()
	defer d.allowedMu.Unlock()
	t := d.allowed.Load()
	if t == nil {
		t = new(bart.Table[uint8])
	}
	for _, p := range del {
		t = t.DeletePersist(p.Masked())
	}
	for _, p := range add {
		if p.Bits() > 0 {
			t = t.InsertPersist(p.Masked(), uint8(p.Bits()))
		}
	}
	d.allowed.Store(t)
}

// hostSet is a set of the host's own addresses (SetHostAddrs), unmapped.
type hostSet map[netip.Addr]struct{}

// SetHostAddrs replaces the host's own addresses: those Linux delivers
// locally when a packet to them comes in from wg0 (its local table: every
// address of the host, and the IPv4 directed broadcast addresses of its
// prefixes, srcaddr.AppendBroadcasts), whatever else routes them. Write
// drops a decrypted packet to one of them as PortDropLocal, at once and
// unanswered, before the TTL check (Linux checks the TTL of forwarded
// packets only): the device has no way to hand it to the host's stack,
// and sent to the LAN it waited ResolveWait for a neighbour that never
// answers (a broadcast address, the host's own), holding up the peer's
// packets behind it, and was answered "host unreachable" from the very
// address it was sent to. Nil or empty: none (the default). The set is
// published whole: Write loads it once per call and looks a destination
// up once per change of destination within the call. Safe for concurrent
// use; O(len(addrs)).
func (d *PortDevice) SetHostAddrs(addrs []netip.Addr) {
	if len(addrs) == 0 {
		d.hosts.Store(nil)
		return
	}
	h := make(hostSet, len(addrs))
	for _, a := range addrs {
		h[a.Unmap()] = struct{}{}
	}
	d.hosts.Store(&h)
}

// lastRoute is Write's memory of route's last answer within a call, so
// that a batch to one destination asks the tables once; rt and found are
// the route toward dst (found false: none covers it), which Write's
// next-hop look-up reads, unless local (not looked up).
type lastRoute struct {
	dst   netip.Addr // invalid: none yet
	to    routeVerdict
	rt    arp.Route
	found bool
}

// routeVerdict is where route sends a decrypted packet.
type routeVerdict uint8

const (
	routeLAN    routeVerdict = iota // toward the LAN's next hop (or no_route without LANIndex)
	routeTunnel                     // back into the tunnel (routeToTunnel)
	routeLocal                      // to one of the host's own addresses: dropped as local
	routeOff                        // off the LAN (PortConfig.LANIndex): dropped as off_lan
)

// route tells where a decrypted packet to dst goes, by the allowed IPs
// al, the host's addresses hosts and the routes tab (Write's snapshots):
// local, to the host (hosts, SetHostAddrs), as Linux's local table comes
// before the rest; else tunnel, back into the tunnel (routeToTunnel); else
// off the LAN when the route toward dst leads elsewhere
// (PortConfig.LANIndex); else to the LAN. last keeps the answer, and the
// route, for the next packet to the same destination.
func (d *PortDevice) route(al *bart.Table[uint8], hosts *hostSet, tab arp.RouteTable, dst netip.Addr, last *lastRoute) routeVerdict {
	if dst == last.dst {
		return last.to
	}
	*last = lastRoute{dst: dst}
	if hosts != nil {
		if _, ok := (*hosts)[dst]; ok {
			last.to = routeLocal
			return routeLocal
		}
	}
	last.rt, last.found = tab.Route(dst)
	switch {
	case al != nil && routeToTunnel(al, dst, last.rt, last.found):
		last.to = routeTunnel
	case d.cfg.LANIndex != 0 && (!last.found || last.rt.IfIndex != d.cfg.LANIndex):
		last.to = routeOff
	}
	return last.to
}

// routeToTunnel reports whether a decrypted packet to dst goes back into
// the tunnel: the longest allowed-IPs prefix holding dst is longer than
// the route r toward it (found false: none; or equal, for IPv4, or IPv6
// against a route of a metric of tunnelRouteMetric6 or more), as Linux's
// longest-prefix match over a table holding both would choose.
func routeToTunnel(al *bart.Table[uint8], dst netip.Addr, r arp.Route, found bool) bool {
	bits, ok := al.Lookup(dst)
	if !ok {
		return false
	}
	switch {
	case !found || r.Prefix.Bits() < int(bits):
		return true
	case r.Prefix.Bits() > int(bits):
		return false
	}
	return dst.Is4() || r.Metric >= tunnelRouteMetric6
}

// judgement is judge's verdict on a transit packet.
type judgement uint8

const (
	judgedOK      judgement = iota // forwarded, as far as judge goes
	judgedDrop                     // dropped, counted
	judgedOptions                  // dropped for its options, counted: answered where Linux answers (optionsError)
	judgedScope                    // from an IPv6 link-local source: not counted, the caller's to judge after the hop limit
)

// judge makes the checks of a transit packet pkt (IP header checked by the
// caller) that precede its TTL decrement, counting a drop by reason, and
// returns its verdict: judgedOptions for a drop for pkt's options, which
// the caller answers with parameter problem where Linux does
// (optionsError: Linux checks options as it receives a packet, before the
// addresses and the hop), judgedScope for a link-local source
// (header.TransitBeyondScope), which the caller judges after the hop
// limit and by the route (forwardIn, forwardOut). header's inlined
// PlainUnicast and OptionsPlain settle the common packet.
func (d *PortDevice) judge(pkt []byte) judgement {
	if !header.OptionsPlain(pkt) && header.TransitOptions(pkt) != header.TransitOK {
		d.ctr.drops[PortDropIPOptions].Add(1)
		return judgedOptions
	}
	if !header.PlainUnicast(pkt) {
		switch header.TransitAddrs(pkt) {
		case header.TransitMartian:
			d.ctr.drops[PortDropMartian].Add(1)
			return judgedDrop
		case header.TransitMulticast:
			d.ctr.drops[PortDropMulticast].Add(1)
			return judgedDrop
		case header.TransitBeyondScope:
			return judgedScope
		}
	}
	return judgedOK
}

// linkLocalDest reports whether pkt is IPv6 to a link-local address
// (fe80::/10), which judge drops as martian. Out of the tunnel Linux
// answers such a packet "no route to destination" (ICMPv6 type 1 code 0,
// RFC 4443 §3.1), whatever its hop limit: its route lookup keeps a
// link-local destination to the interface the packet came in by
// (ip6_route_input, rt6_need_strict), and wg0 has no link-local prefix
// (as fastpath's linkLocalDest). From the LAN it drops it unanswered.
func linkLocalDest(pkt []byte) bool {
	return pkt[0]>>4 == header.IPv6Version && pkt[24] == 0xfe && pkt[25]&0xc0 == 0x80
}

// headerOK reports whether the IP header of pkt (at least 20 bytes for
// IPv4, 40 for IPv6: destination or take checked) is within pkt, as judge
// needs, and sound, as a router checks before it forwards (RFC 1812
// §5.2.2; the fast path's header.ParseL3): an IPv4 IHL of 5 or more
// within pkt and a right header checksum (the TTL decrement's incremental
// update would forward a wrong one still wrong, for the receiver to drop
// uncounted), an IPv6 payload length within pkt. wireguard-go trims a
// decrypted packet to its length field but reads neither the IHL nor the
// checksum.
func headerOK(pkt []byte) bool {
	if pkt[0]>>4 == header.IPv4Version {
		ihl := int(pkt[0]&0xf) * 4
		return ihl >= header.IPv4MinLen && ihl <= len(pkt) && header.IPv4(pkt).VerifyChecksum()
	}
	return header.IPv6Len+header.IPv6(pkt).PayloadLength() <= len(pkt)
}

// lastHop reports whether pkt's TTL or hop limit is 0 or 1: forwarding it
// would leave it at 0 (RFC 1812 §5.3.1, RFC 8200 §3).
func lastHop(pkt []byte) bool {
	if pkt[0]>>4 == header.IPv4Version {
		return pkt[8] <= 1
	}
	return pkt[7] <= 1
}

// clampMSS applies PortConfig.MSSClamp4/6 to the transit packet pkt.
func (d *PortDevice) clampMSS(pkt []byte) {
	mss := d.cfg.MSSClamp4
	if pkt[0]>>4 != header.IPv4Version {
		mss = d.cfg.MSSClamp6
	}
	if mss != 0 {
		header.ClampMSS(pkt, mss)
	}
}

// forwardIn does what a router does to pkt, received from the LAN, before
// it enters the tunnel: judge, then, for IPv6 in a tunnel without it
// (no6), no route to destination (Linux's route lookup fails before
// ip6_forward's checks), then the TTL check, then a link-local
// source's, answering the LAN host with parameter problem, no route,
// time exceeded or beyond scope (icmpErrorLAN). It reports
// whether pkt goes on; the TTL decrement and the MSS clamp are the
// caller's, on the copy it hands wireguard-go (Read's buffer, or the
// fragment queue's).
func (d *PortDevice) forwardIn(eth, pkt []byte) bool {
	if !headerOK(pkt) { // an IHL below 5: take reads only the total length
		d.ctr.drops[PortDropMalformed].Add(1)
		return false
	}
	j := d.judge(pkt)
	switch j {
	case judgedDrop:
		return false
	case judgedOptions:
		d.optionsErrorLAN(eth, pkt)
		return false
	}
	if d.no6 && pkt[0]>>4 != header.IPv4Version {
		d.ctr.drops[PortDropIPv6Off].Add(1)
		d.icmpErrorLAN(eth, pkt, icmpError{kind: icmpNoRoute})
		return false
	}
	if lastHop(pkt) {
		d.ctr.drops[PortDropTTLExceeded].Add(1)
		d.icmpErrorLAN(eth, pkt, icmpError{kind: icmpTimeExceeded})
		return false
	}
	if j == judgedScope {
		d.ctr.drops[PortDropMartian].Add(1)
		d.icmpErrorLAN(eth, pkt, icmpError{kind: icmpBeyondScope})
		return false
	}
	return true
}

// forwardOut does what a router does to pkt, written by wireguard-go (a
// decrypted packet), before it goes on: an IPv6 packet in a tunnel
// without it (no6) dropped (PortDropIPv6Off: Linux's ipv6_rcv drops it
// on such a wg0, before any check), judge (an IPv6 link-local
// destination, a martian, answered "no route" into the tunnel:
// linkLocalDest), the host's own addresses
// (route: dropped as local), the TTL check (parameter problem, time
// exceeded or, for a link-local source not going back into the tunnel,
// beyond scope into the tunnel, icmpErrorTunnel), a route off the LAN
// (route: dropped as off_lan), the TTL decrement and the MSS clamp,
// in place (wireguard-go's buffer, which Write does not keep). It returns
// outLAN for a packet to send to the LAN (by last's route), outLoop for
// one to hand back to wireguard-go (peer to peer, routeToTunnel: Write
// queues the batch's in the loop queue at once), or outDropped (counted).
func (d *PortDevice) forwardOut(pkt []byte, dst netip.Addr, al *bart.Table[uint8], hosts *hostSet, tab arp.RouteTable, last *lastRoute) outVerdict {
	if !headerOK(pkt) {
		d.ctr.drops[PortDropMalformed].Add(1)
		return outDropped
	}
	if d.no6 && pkt[0]>>4 != header.IPv4Version {
		d.ctr.drops[PortDropIPv6Off].Add(1)
		return outDropped
	}
	j := d.judge(pkt)
	switch j {
	case judgedDrop:
		if linkLocalDest(pkt) { // counted martian by judge
			d.icmpErrorTunnel(pkt, icmpError{kind: icmpNoRoute}, al)
		}
		return outDropped
	case judgedOptions:
		d.optionsErrorTunnel(pkt, al)
		return outDropped
	}
	to := d.route(al, hosts, tab, dst, last)
	if to == routeLocal {
		d.ctr.drops[PortDropLocal].Add(1)
		return outDropped
	}
	tunnel := to == routeTunnel
	if lastHop(pkt) {
		d.ctr.drops[PortDropTTLExceeded].Add(1)
		d.icmpErrorTunnel(pkt, icmpError{kind: icmpTimeExceeded}, al)
		return outDropped
	}
	if j == judgedScope && !tunnel {
		d.ctr.drops[PortDropMartian].Add(1)
		d.icmpErrorTunnel(pkt, icmpError{kind: icmpBeyondScope}, al)
		return outDropped
	}
	if to == routeOff {
		d.ctr.drops[PortDropOffLAN].Add(1)
		return outDropped
	}
	header.DecrementHop(pkt)
	d.clampMSS(pkt)
	if tunnel {
		return outLoop
	}
	return outLAN
}

// outVerdict is forwardOut's answer.
type outVerdict uint8

const (
	outLAN outVerdict = iota
	outLoop
	outDropped
)
