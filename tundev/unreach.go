package tundev

import (
	"encoding/binary"
	"net/netip"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/header"
)

// unreachable answers pkt, a received IP packet (header checked) that Read
// drops as no_route (SetNoRoute), with ICMP host unreachable (type 3 code
// 1, RFC 792, RFC 1812 §5.2.7.1) or ICMPv6 address unreachable (type 1
// code 3, RFC 4443 §3.1), as Linux's WireGuard answers a packet no peer's
// allowed IPs hold (wg_xmit, -ENOKEY, through icmp_ndo_send), where Linux
// routes it and from the address it chooses (icmpErrorLAN). It is not sent
// where RFC 1812 §4.3.2.7 / RFC 4443 §2.4(e) forbid it, and it spends the
// device's rate limiter, Linux's defaults (icmp_ratelimit 1000 ms per
// destination with a burst of 6, icmp_msgs_per_sec 1000, icmp_msgs_burst
// 50, and for IPv6 the interval shortened by the length of the route
// back, as icmpv6_xrlim_allow: the ICMP keys do not apply in compat
// mode), counting what it holds back (PortStats.ICMPSuppressed). The quote
// shows pkt as given: take hands it what wg_xmit would be handed (its hop
// taken; of IPv4 without DF over the tunnel MTU the first fragment).
// Called from Read, which holds rmu (d.reply).
func (d *PortDevice) unreachable(eth, pkt []byte) {
	d.icmpErrorLAN(eth, pkt, icmpError{kind: icmpUnreachable})
}

// routeBits is the prefix length of the route toward dst
// (PortConfig.Routes), 64 when it has none.
func (d *PortDevice) routeBits(dst netip.Addr) int {
	if r, ok := d.cfg.Routes.Table().Route(dst); ok {
		return r.Prefix.Bits()
	}
	return 64
}

// dropOut counts pkt, a decrypted packet Write drops for r (no route or
// no neighbour), and answers it into the tunnel with "host unreachable" /
// "address unreachable" when its LAN next hop did not resolve, as Linux's
// neighbour layer answers the packets it queued (icmperr.go).
func (d *PortDevice) dropOut(pkt []byte, r PortDropReason, al *bart.Table[uint8]) {
	d.ctr.drops[r].Add(1)
	if r == PortDropNoNeighbour && !d.lanBroadcast(pkt) {
		d.icmpErrorTunnel(pkt, icmpError{kind: icmpUnreachable}, al)
	}
}

// lanBroadcast reports whether pkt is an IPv4 packet to the directed
// broadcast address of its on-link route (PortConfig.Routes; a prefix of
// /30 or shorter): no ICMP error answers a packet to a broadcast address
// (RFC 1812 §4.3.2.7), which no neighbour answers for. A rare path
// (Write's drops).
func (d *PortDevice) lanBroadcast(pkt []byte) bool {
	if pkt[0]>>4 != header.IPv4Version {
		return false
	}
	dst := netip.AddrFrom4(header.IPv4(pkt).DstBytes())
	r, ok := d.cfg.Routes.Table().Route(dst)
	if !ok || r.Gateway.IsValid() || !r.Prefix.Addr().Is4() || r.Prefix.Bits() > 30 {
		return false
	}
	a := r.Prefix.Masked().Addr().As4()
	bcast := binary.BigEndian.Uint32(a[:]) | (1<<(32-r.Prefix.Bits()) - 1)
	d4 := dst.As4()
	return binary.BigEndian.Uint32(d4[:]) == bcast
}
