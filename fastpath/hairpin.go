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
//     and D goes where L leads, as any other packet (toward the LAN, or
//     to the host: below);
//   - L, the length of the LAN resolver's route toward D (RouteLengths:
//     the kernel's main table without the routes into the exception TUN,
//     or owned mode's static routes; -1 without a route or without
//     RouteLengths); L > A's length, and D goes where L leads (toward
//     the LAN, or to the host: below), as Linux's more specific route
//     wins; at equal lengths too when Linux
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
// lanRoute's answers (a power of 2; 40 bytes each).
const hairCacheSize = 256

// routeVerdict is where a decrypted transit packet goes (lanRoute).
type routeVerdict uint8

const (
	routeLAN    routeVerdict = iota // toward the LAN's next hop (or no route at all)
	routeTunnel                     // back into the tunnel (the rule above)
	routeHost                       // to the host's kernel, which forwards it (below)
)

// To the host: a destination no allowed-IPs prefix takes (by the rule
// above) whose LAN resolver's route leads out of another interface than
// the LAN (RouteLengths' offLAN: the WAN's default route toward the
// Internet, for a road warrior whose own AllowedIPs = 0.0.0.0/0 sends
// everything into the tunnel; a route that sends nowhere, unreachable
// or blackhole; or no route the resolver sees, where the kernel's rules
// may choose another table) goes to the host's kernel through the
// exception interface (Config.Exception, the gateway's wg0), which
// routes it by its rules and tables, through netfilter (the operator's NAT), as Linux's wg0
// hands it to the same kernel. The kernel's routes into the exception
// interface bring the replies back (one per allowed-IPs prefix,
// gateway/fastgw). The kernel takes the router's hop (ip_forward), so
// the packet goes with the TTL / hop limit it came out of the tunnel
// with (parseInner's hop put back: one in all); a TTL of 1 was answered
// here already (time exceeded), and MSSClamp applied as to any transit
// packet. Without an exception interface there is
// no way into the kernel: such packets are dropped (DropOffLAN). Counted
// in QueueStats.ToHost, and as received from their peer. Owned mode's
// routes all lead to the LAN: it never sends a packet to the host.

// hairEntry is lanRoute's answer for addr under the allowed-IPs snapshot
// of generation gen (worker.hairGen), valid until expires (ns, the
// worker's clock): the LAN's routes are asked again after
// NeighbourCacheTTL, as its neighbours are.
type hairEntry struct {
	addr    netip.Addr
	expires int64
	gen     uint32
	to      routeVerdict
}

// lanRoute returns where a decrypted transit packet to dst goes (the
// rules above), for snapshot rt at now. The answer is kept per
// destination in a small direct-mapped cache (w.hairCache, by the
// neighbour cache's hash): the route-cache look-up, the prefix-table walk
// and the RouteLengths call come once per destination and snapshot, and
// at most once per NeighbourCacheTTL. A change of the LAN's routes
// therefore applies within NeighbourCacheTTL. Inbound asks only for a
// destination not already resolved toward the LAN in the burst. Not
// inlined: off the path of a burst's repeated destinations.
//
//go:noinline
func (w *worker) lanRoute(rt *routeTable, dst netip.Addr, now int64) routeVerdict {
	if rt != w.hairRT {
		w.hairRT = rt
		w.hairGen++
	}
	e := &w.hairCache[nbrHash(dst)&(hairCacheSize-1)]
	if e.addr == dst && e.gen == w.hairGen && now < e.expires {
		return e.to
	}
	to := w.routeOf(rt, dst)
	*e = hairEntry{addr: dst, expires: now + int64(NeighbourCacheTTL), gen: w.hairGen, to: to}
	return to
}

// routeOf is lanRoute's answer, worked out.
func (w *worker) routeOf(rt *routeTable, dst netip.Addr) routeVerdict {
	bits, first, off := -1, false, false
	if l := w.e.lanLens; l != nil {
		bits, first, off = l.PrefixLen(dst)
	}
	if p, _ := w.srcRoutes.lookup(rt, dst); p != nil {
		pfx, _, ok := rt.t.LookupPrefixLPM(netip.PrefixFrom(dst, dst.BitLen()))
		if ok && pfx.Bits() != 0 && (bits < pfx.Bits() || bits == pfx.Bits() && !first) {
			return routeTunnel
		}
	}
	if off {
		return routeHost
	}
	return routeLAN
}

// offLAN is inbound's first-pass verdict on the transit packet ip, in f
// (described by m and w.pkt), whose route lanRoute found to be r, not
// the LAN's: hairpin's for routeTunnel; for routeHost innerHost with the
// hop put back (the kernel takes it), or innerOffLAN without an
// exception interface (exc false). Not inlined: a rare path.
//
//go:noinline
func (w *worker) offLAN(f *dataplane.Frame, m *rxMeta, ip []byte, r routeVerdict, exc bool) innerVerdict {
	if r == routeTunnel {
		return w.hairpin(f, m, ip)
	}
	if !exc {
		return innerOffLAN
	}
	if routerWork {
		header.UndoHop(ip, &w.pkt)
	}
	return innerHost
}

// hairpin is inbound's first-pass verdict on the transit packet ip, in f
// (described by m and w.pkt), that lanRoute sends back into the
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

// handToHost hands the burst's packets for the host (w.toHost, gathered
// by deliver) to Config.Exception in one call, an exception TUN coalescing
// a flow's into one write; their frames are freed after it, with the
// rest of the burst's. Nothing when there are none.
func (w *worker) handToHost() {
	if len(w.toHost) == 0 {
		return
	}
	w.e.cfg.Exception(w.id, w.toHost)
	clear(w.toHost)
	w.toHost = w.toHost[:0]
}
