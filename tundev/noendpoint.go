package tundev

import (
	"net/netip"

	"github.com/gaissmai/bart"
)

// EndpointChecker says whether a peer has an endpoint now: HasEndpoint
// is asked from Read for each packet to the peer's allowed IPs while the
// peer is marked as without one (SetNoEndpoint), so it must not block
// and must be safe for concurrent use.
type EndpointChecker interface {
	HasEndpoint() bool
}

// EndpointRoute is one allowed IP of SetNoEndpoint: Peer is the check of
// a peer that had no endpoint when the routes were read, nil for a peer
// that had one.
type EndpointRoute struct {
	Prefix netip.Prefix
	Peer   EndpointChecker
}

// SetNoEndpoint makes Read drop, as PortDropNoEndpoint, a received packet
// whose destination's longest match among routes (every peer's allowed
// IPs, as wireguard-go routes by them) has a Peer whose HasEndpoint
// reports false, and answer it with host unreachable (unreachable), as
// Linux's WireGuard answers a packet for a peer that has no endpoint
// (wg_xmit, -EDESTADDRREQ, through icmp_ndo_send) and the fast path does
// (fastpath's DropNoEndpoint): wireguard-go would hold it in the peer's
// staged queue, unable to start a handshake, and drop it uncounted. The
// marks may be stale, not the verdict: HasEndpoint asks the peer's
// current state per packet, so a peer that connected since the routes
// were read (a road warrior's first handshake) is never answered
// unreachable. routes with no Peer set (or none) turn the check off:
// Read then costs nothing more per packet; with one, one
// allocation-free trie lookup per packet. It replaces the previous
// routes; O(len(routes)). Safe for concurrent use.
func (d *PortDevice) SetNoEndpoint(routes []EndpointRoute) {
	var t *bart.Table[EndpointChecker]
	for _, r := range routes {
		if r.Peer != nil {
			t = new(bart.Table[EndpointChecker])
			break
		}
	}
	if t != nil {
		for _, r := range routes {
			t.Insert(r.Prefix, r.Peer)
		}
	}
	d.noEndpoint.Store(t)
}

// noPeer is why Read drops IP packet pkt, whose header it checked, before
// wireguard-go sees it: PortDropNoRoute for a destination in nr
// (SetNoRoute's table, or nil), PortDropNoEndpoint for one routed to a
// peer without endpoint in ne (SetNoEndpoint's table, or nil), else
// NumPortDropReasons. The destination is read once for both.
func noPeer(nr *bart.Table[bool], ne *bart.Table[EndpointChecker], pkt []byte) PortDropReason {
	if nr == nil && ne == nil {
		return NumPortDropReasons
	}
	dst, ok := destination(pkt)
	if !ok {
		return NumPortDropReasons
	}
	if nr != nil {
		if drop, ok := nr.Lookup(dst); ok && drop {
			return PortDropNoRoute
		}
	}
	if ne != nil {
		if p, ok := ne.Lookup(dst); ok && p != nil && !p.HasEndpoint() {
			return PortDropNoEndpoint
		}
	}
	return NumPortDropReasons
}
