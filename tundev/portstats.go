package tundev

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/counts"
)

// PortDropReason says why the PortDevice dropped a frame or packet.
type PortDropReason uint8

// Drop reasons of a PortDevice.
const (
	// PortDropNotIP: a received frame neither IPv4 nor IPv6 (nor, in
	// owned mode, ARP/NDP the Responder used).
	PortDropNotIP PortDropReason = iota
	// PortDropMalformed: a received frame shorter than its IP header or
	// length field says, or with a wrong IP version; or a written packet
	// that is not IPv4 or IPv6, or an IPv4 fragment that Write must cut
	// whose pieces would start past the largest fragment offset (65,528).
	PortDropMalformed
	// PortDropTooBig: a received packet larger than Read's buffer, or a
	// written one larger than the MTU of its way out (the LAN MTU,
	// SetLANMTU; the tunnel MTU for one going back into the tunnel) that
	// may not be fragmented (DF, IPv6: answered "fragmentation needed" /
	// "packet too big", lanmtu.go).
	PortDropTooBig
	// PortDropNeighbour: an ARP/NDP frame the Responder refused.
	PortDropNeighbour
	// PortDropNoRoute: no route to a written packet's destination; or a
	// received packet to a prefix that left wireguard-go's allowed IPs
	// (SetNoRoute), which wireguard-go would drop uncounted.
	PortDropNoRoute
	// PortDropNoNeighbour: the next hop did not resolve.
	PortDropNoNeighbour
	// PortDropNoBuffer: the pool had no free frame, or the loop queue
	// (peer-to-peer packets and ICMP errors into the tunnel) was full.
	PortDropNoBuffer
	// PortDropTXFull: the TX ring stayed full.
	PortDropTXFull
	// PortDropOverMTU: a received IPv4 packet with DF, or IPv6 packet,
	// larger than the tunnel MTU (answered with "fragmentation needed" or
	// "packet too big" when ICMP allows and a source address is known).
	PortDropOverMTU
	// PortDropFragment: a received packet larger than the tunnel MTU that
	// cannot be fragmented (its header leaves no room for 8 data bytes in
	// the MTU, or it does not fit the fragmentation buffer).
	PortDropFragment
	// PortDropVLAN: a received frame with an 802.1Q tag of a VLAN other
	// than 0 (a priority tag), or an 802.1ad tag: another VLAN's traffic,
	// never forwarded into the tunnel (the XDP program leaves such frames
	// to the kernel; a port without one hands them over).
	PortDropVLAN
	// PortDropTTLExceeded: a transit packet, either way, with TTL or hop
	// limit 0 or 1 (answered with time exceeded when ICMP allows:
	// router.go).
	PortDropTTLExceeded
	// PortDropMartian: a transit packet with an address no router
	// forwards (header.TransitAddrs); one from an IPv6 link-local source
	// is answered with "beyond scope of source address" (router.go).
	PortDropMartian
	// PortDropMulticast: a transit packet to a multicast address or
	// 255.255.255.255, which Linux without a multicast routing daemon
	// never forwards.
	PortDropMulticast
	// PortDropIPOptions: a transit packet with IPv4 options or an IPv6
	// hop-by-hop header Linux does not forward (header.TransitOptions).
	PortDropIPOptions
	// PortDropNoEndpoint: a received packet whose destination's peer has
	// no endpoint (SetNoEndpoint): a road warrior that has not connected
	// since the gateway started, to which wireguard-go could only hold it.
	PortDropNoEndpoint
	// PortDropLinkDown: a packet the kernel dropped after Write put it on
	// the TX ring, for a LAN without carrier (the port's
	// dataplane.DropLinkDown, which Stats reads; TXPackets counted it).
	PortDropLinkDown
	// PortDropDriver: a packet the LAN's driver dropped after Write put
	// it on the TX ring, with the link up (the port's
	// dataplane.DropDriver, which Stats reads; TXPackets counted it).
	PortDropDriver
	// PortDropLocal: a written (decrypted) packet to one of the host's
	// own addresses (SetHostAddrs: in compat mode the tunnel, LAN and WAN
	// addresses and their IPv4 directed broadcasts), which Linux delivers
	// locally and forwards none of, and which the device has no way to
	// hand to the host's stack: dropped at once, unanswered, where it
	// was sent to a LAN neighbour that never answered (router.go).
	PortDropLocal
	// PortDropOffLAN: a written (decrypted) packet whose route leads out
	// of another interface than the LAN, sends nowhere (unreachable,
	// blackhole, prohibit) or is not in the main table
	// (PortConfig.LANIndex: gateway/compatgw): a full tunnel's Internet
	// traffic, a network the host routes by another link. Linux's wg0
	// hands it to the host's kernel, which forwards it (or answers it);
	// the device has no way into the kernel, so it is dropped at once,
	// unanswered, never sent to the LAN (router.go). fastpath counts the
	// same drop as off_lan without an exception TUN.
	PortDropOffLAN
	// PortDropIPv6Off: an IPv6 packet, either way, while the tunnel MTU
	// (PortConfig.MTU) is below 1280, where Linux turns IPv6 off on its
	// wg0 (its IPv6 routes removed, the IPv6 packets it receives
	// dropped): a received one is answered "no route to destination"
	// (ICMPv6 type 1 code 0, as Linux's ip6_pkt_drop), before its hop
	// limit is judged; a written one is dropped unanswered, and no ICMPv6
	// error goes into the tunnel (router.go). fastpath counts the same
	// as ipv6_off.
	PortDropIPv6Off

	NumPortDropReasons
)

var portDropNames = [NumPortDropReasons]string{
	"not_ip", "malformed", "too_big", "neighbour", "no_route", "no_neighbour", "no_buffer", "tx_full",
	"over_mtu", "cannot_fragment", "vlan", "ttl_exceeded", "martian", "multicast", "ip_options",
	"no_endpoint", "link_down", "driver_drop", "local", "off_lan", "ipv6_off",
}

// String returns the reason's snake-case name.
func (r PortDropReason) String() string { return counts.Name(portDropNames[:], r) }

const _ = counts.MaxReasons - NumPortDropReasons // at most MaxReasons reasons

// portCounters are written by Read's goroutine (rx, and the drops and
// replies of receiving) and by Write's (tx): rx and tx are on lines of
// their own, so that the two goroutines, on two CPUs, do not take each
// other's line once per batch.
type portCounters struct {
	rx               atomic.Uint64
	_                [56]byte
	tx               atomic.Uint64
	_                [56]byte
	replies          atomic.Uint64
	fragmented, icmp atomic.Uint64
	icmpSuppressed   atomic.Uint64
	peerToPeer       atomic.Uint64
	drops            counts.Atomic[PortDropReason]
}

// PortStats are a PortDevice's counters.
type PortStats struct {
	RXPackets        uint64         `json:"rx_packets"`        // packets returned by Read
	TXPackets        uint64         `json:"tx_packets"`        // packets transmitted by Write
	NeighbourReplies uint64         `json:"neighbour_replies"` // ARP/NDP answers sent (owned mode)
	Fragmented       uint64         `json:"fragmented"`        // IPv4 packets sent on as fragments: received ones over the tunnel MTU, written ones over the port's
	ICMPErrors       uint64         `json:"icmp_errors"`       // "fragmentation needed" / "packet too big", time exceeded, host / address unreachable, beyond scope and parameter problem answers sent
	ICMPSuppressed   uint64         `json:"icmp_suppressed"`   // time exceeded, unreachable, beyond scope and parameter problem answers the rate limits held back
	PeerToPeer       uint64         `json:"peer_to_peer"`      // decrypted packets handed back to wireguard-go for a peer (router.go)
	Drops            PortDropCounts `json:"drops"`
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (d *PortDevice) Stats() PortStats {
	s := PortStats{RXPackets: d.ctr.rx.Load(), TXPackets: d.ctr.tx.Load(), NeighbourReplies: d.ctr.replies.Load(),
		Fragmented: d.ctr.fragmented.Load(), ICMPErrors: d.ctr.icmp.Load(),
		ICMPSuppressed: d.ctr.icmpSuppressed.Load(), PeerToPeer: d.ctr.peerToPeer.Load()}
	s.Drops = d.ctr.drops.Load()
	for i := range d.cfg.Port.NumQueues() {
		st := d.cfg.Port.Queue(i).Stats()
		s.Drops[PortDropLinkDown] += st.Drops[dataplane.DropLinkDown]
		s.Drops[PortDropDriver] += st.Drops[dataplane.DropDriver]
	}
	return s
}

// PortDropCounts counts a PortDevice's drops by reason, indexed by
// PortDropReason. In JSON it is an object of the nonzero counts by reason
// name, which UnmarshalJSON reads back; an unknown name is an error. Its
// methods (those of internal/counts.Counts, which go doc does not list):
// List gives the nonzero counts as sorted "reason=count" strings (print
// that: %v prints the whole array), Total their sum, Add adds another's.
type PortDropCounts = counts.Counts[PortDropReason]
