package fastpath

import (
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// Peer-to-peer forwarding (hub and spoke): a decrypted transit packet whose
// destination lies in a peer's allowed IPs goes back into the tunnel, sealed
// to that peer (cryptokey routing, whitepaper §2), as a Linux router's wg0
// sends it back out, since the gateway's routes of the allowed IPs into wg0
// (gateway/fastgw: one per prefix, none for a /0) sit in the same table as
// the LAN's and the longest prefix wins. The rule, judged after the source
// check, the own-address and martian checks and the TTL check of inbound's
// first pass, for a destination D:
//
//   - A, the longest allowed-IPs prefix holding D, of peer P; none, or a
//     /0 (which has no route into wg0: README, "Behaviour as a router"),
//     and D goes toward the LAN as any other packet;
//   - L, the length of the LAN resolver's route toward D (RouteLengths:
//     the kernel's main table without the routes into the exception TUN,
//     or owned mode's static routes; -1 without a route or without
//     RouteLengths); L > A's length, and D goes toward the LAN, as
//     Linux's more specific route wins; at equal lengths too when Linux
//     would prefer the LAN's route to the gateway's of the same prefix
//     into wg0: an IPv6 route of a metric below the gateway's 1024 (the
//     kernel's own for an on-link /64 has 256). The gateway's IPv4 route,
//     of metric 0, replaces (RTM_NEWROUTE with NLM_F_REPLACE) a route of
//     its key and precedes the others of its prefix;
//   - otherwise the packet goes to P, P may be the peer it came from
//     (Linux sends it back as well).
//
// Such a packet is forwarded as a router forwards any transit packet (RFC
// 1812 §5.3.1): its TTL / hop limit drops by one, once (parseInner took
// the hop; hairpin puts it back, and outbound's header.Forward takes it
// again), time exceeded went to its source through the tunnel already (a
// TTL of 1), and one over the tunnel MTU is answered with "fragmentation
// needed" / "packet too big" into the tunnel (DF set, or IPv6: RFC 1812
// §4.3.2.7, RFC 4443 §3.2; innerTunnelTooBig) or, IPv4 without DF, cut by
// outbound's fragmenter (RFC 791). Inbound's deliver collects these
// frames (w.hair, an Ethernet header of the LAN's VLAN in front, as if a
// LAN host had sent them) and, after the inbound burst is sent,
// hairpinBurst runs them through outbound's burst code on the same
// worker: route, MSS clamp, nonce lease, held frames and a handshake for
// a peer without a session, one chachapoly.Seal call, templates, source
// ports. Counters: rx on the source peer (deliver), tx on the
// destination peer (outbound), QueueStats.PeerToPeer.

// hairCacheSize is the number of entries of a worker's cache of
// tunnelBound's answers (a power of 2; 40 bytes each).
const hairCacheSize = 256

// hairEntry is tunnelBound's answer for addr (to: into the tunnel) under
// the allowed-IPs snapshot of generation gen (worker.hairGen), valid until
// expires (ns, the worker's clock): the LAN's routes are asked again after
// NeighbourCacheTTL, as its neighbours are.
type hairEntry struct {
	addr    netip.Addr
	expires int64
	gen     uint32
	to      bool
}

// tunnelBound reports whether a decrypted transit packet to dst goes back
// into the tunnel (the rule above), for snapshot rt at now. The answer is
// kept per destination in a small direct-mapped cache (w.hairCache, by the
// neighbour cache's hash): the route-cache look-up, the prefix-table walk
// and the RouteLengths call come once per destination and snapshot, and
// at most once per NeighbourCacheTTL, the call only for destinations a
// peer's allowed IPs hold. A change of the LAN's routes therefore applies
// to peer-to-peer decisions within NeighbourCacheTTL. Inbound asks only
// for a destination not already resolved toward the LAN in the burst.
// Not inlined: off the path of a burst's repeated destinations.
//
//go:noinline
func (w *worker) tunnelBound(rt *routeTable, dst netip.Addr, now int64) bool {
	if rt != w.hairRT {
		w.hairRT = rt
		w.hairGen++
	}
	e := &w.hairCache[nbrHash(dst)&(hairCacheSize-1)]
	if e.addr == dst && e.gen == w.hairGen && now < e.expires {
		return e.to
	}
	to := w.tunnelRoute(rt, dst)
	*e = hairEntry{addr: dst, expires: now + int64(NeighbourCacheTTL), gen: w.hairGen, to: to}
	return to
}

// tunnelRoute is tunnelBound's answer, worked out.
func (w *worker) tunnelRoute(rt *routeTable, dst netip.Addr) bool {
	if p, _ := w.srcRoutes.lookup(rt, dst); p == nil {
		return false
	}
	pfx, _, ok := rt.t.LookupPrefixLPM(netip.PrefixFrom(dst, dst.BitLen()))
	if !ok || pfx.Bits() == 0 {
		return false
	}
	if l := w.e.lanLens; l != nil {
		if bits, first := l.PrefixLen(dst); bits > pfx.Bits() || bits == pfx.Bits() && first {
			return false
		}
	}
	return true
}

// hairpin is inbound's first-pass verdict on the transit packet ip, in f
// (described by m and w.pkt), that tunnelBound sends back into the
// tunnel: innerTunnelTooBig for one over the tunnel MTU that may not be
// fragmented (DF, or IPv6), else innerHairpin with the hop put back (for
// outbound's header.Forward to take) and an Ethernet header of the LAN's
// VLAN in front (outbound's parse reads one). Not inlined: a rare path.
//
//go:noinline
func (w *worker) hairpin(f *dataplane.Frame, m *rxMeta, ip []byte) innerVerdict {
	v4 := ip[0]>>4 == header.IPv4Version
	if len(ip) > w.e.cfg.MTU && (!v4 || header.IPv4(ip).DontFragment()) {
		return innerTunnelTooBig
	}
	if routerWork {
		header.UndoHop(ip, &w.pkt)
	}
	et := uint16(header.EtherTypeIPv4)
	if !v4 {
		et = header.EtherTypeIPv6
	}
	m.back -= int32(w.putLANEthernet(f, w.lanMAC, et))
	return innerHairpin
}

// hairpinBurst sends the frames deliver collected in w.hair back into the
// tunnel as an outbound burst (outboundBurst) on w.frames, which the
// inbound burst no longer uses.
func (w *worker) hairpinBurst(now int64) {
	n := copy(w.frames, w.hair)
	clear(w.hair)
	w.hair = w.hair[:0]
	w.c.peerToPeer.Add(uint64(n))
	w.outboundBurst(n, false, now)
}
