package gateway

import (
	"net/netip"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// dstMACFor returns the next hop's MAC toward m's source, a message of p's
// (nil: not known, p.mu held otherwise): the route's (Options.Resolve),
// else the last hop's (the frame's source MAC: a route's next hop not
// resolved yet, right when the peer is on-link or behind the same
// router), but none (zero: the workers resolve it, hold what is sent, and
// count a handshake message no_wan_route, or no_neighbour, after 3 s)
// when the WAN has no route toward it (Options.Routed: none, a blackhole,
// unreachable or prohibit route, one out of another interface), as
// Linux's WireGuard sends its reply through a route lookup that fails
// there (drivers/net/wireguard/socket.c, send4/send6), and none when the
// last hop is the MAC the resolver gave for p's endpoint's address and
// has none for now (lastHopTakenBack: the route moved to a next hop not
// resolved yet, or the neighbour failed), as wg0's reply after such a
// move queues on the new next hop's neighbour entry (sent at its ARP/NDP
// answer, dropped when it fails) and nothing goes to the old router: the
// peer's handshake still comes through the old one. Before, the last hop
// answered without a route too (a blackholed endpoint's tunnel came back
// through the blackhole at the peer's next handshake), and after a route
// moved to a silent next hop the response and the session's data went to
// the old router until the next tick took its MAC back again (up to
// 50 ms, at each of the peer's handshakes).
func (d *Device) dstMACFor(m fastpath.HandshakeMessage, p *peer) [6]byte {
	if d.opts.Resolve != nil {
		if mac, ok := d.opts.Resolve(m.Src.Addr()); ok {
			return mac
		}
	}
	if d.opts.Routed != nil && (p != nil && p.lastHopTakenBack(m.Src.Addr(), m.SrcMAC) || !d.opts.Routed(m.Src.Addr())) {
		return [6]byte{}
	}
	return m.SrcMAC
}

// lastHopTakenBack reports whether mac, the last hop of a message from
// src, is the next hop's MAC the resolver last gave for p's endpoint at
// src's address (routedMAC, routedDst; any port: the route and the
// neighbour are the address's), which the caller found the resolver has
// none for now. It may be an old one (the peer not ticked since the
// resolver gave another): the rule then only makes the message wait for
// the route's next hop to resolve (milliseconds when it answers), as
// Linux's does, and it no longer applies once the resolver gives a MAC.
// p.mu held.
func (p *peer) lastHopTakenBack(src netip.Addr, mac [6]byte) bool {
	return p.routedMAC != ([6]byte{}) && mac == p.routedMAC && p.routedDst == src.Unmap()
}

// cookieReplyMAC is dstMACFor for a cookie reply to m: the peer is known
// only for a response (its receiver index names our initiation's peer);
// an initiation's sender is not known before its Curve25519 work, which
// a cookie reply is sent to spare (whitepaper §5.4.7), so the last hop's
// rule of a peer does not apply to it. The peer's lock is not waited
// for (admit screens in the pool's dispatcher, whose messages behind
// would wait behind a handshake worker's Curve25519 work for that peer):
// while a worker holds it, the rule does not apply either.
func (d *Device) cookieReplyMAC(m fastpath.HandshakeMessage) [6]byte {
	var p *peer
	if m.Data[0] == noise.TypeResponse {
		if recv, ok := noise.MessageReceiver(m.Data); ok {
			p = d.pendingPeer(recv)
		}
	}
	if p == nil || !p.mu.TryLock() {
		return d.dstMACFor(m, nil)
	}
	defer p.mu.Unlock()
	return d.dstMACFor(m, p)
}

// setEndpointFromLocked roams p to the outer source of an authenticated
// handshake message (whitepaper §2.1, endpoints and roaming: the endpoint
// is the source of the most recent authenticated packet), its next hop's
// MAC mac (dstMACFor), and reports whether it moved.
func (d *Device) setEndpointFromLocked(p *peer, m fastpath.HandshakeMessage, mac [6]byte) (changed bool) {
	old := p.fp.Endpoint.Load()
	if old != nil && old.Dst == m.Src && old.Src == m.Dst.Addr() && old.DstMAC == mac && !old.Routed {
		return false
	}
	p.fp.Endpoint.Store(&fastpath.Endpoint{Dst: m.Src, Src: m.Dst.Addr(), DstMAC: mac, SrcMAC: d.opts.WANMAC})
	p.fp.NeedNeighbour.Store(false)
	return true
}
