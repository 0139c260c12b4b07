package bind

import "net/netip"

// SetPathMTU sets the path MTU toward the IPv6 endpoint address dst, in
// bytes of IP packet, as an ICMPv6 "packet too big" from a router on the
// way reports it (RFC 8201 §4; gateway/compatgw reads them, package
// internal/toobig): a datagram to dst whose IP packet is larger than mtu
// (and within the port's MTU) is sent as IPv6 fragments of at most mtu
// bytes (Send; counted in Stats.Fragmented and Fragments), as Linux's
// WireGuard, whose kernel keeps the path MTU it learns in the route toward
// the endpoint, sends it. IPv6 routers never fragment, so without it every
// full-size datagram toward such a peer is lost. An mtu below 1,280 is
// taken as 1,280, the least IPv6 link MTU (RFC 8200 §5; internal/toobig
// discards a "packet too big" reporting one, RFC 8201 §4); an mtu of 0 or
// less forgets dst's (the caller expires them, as Linux's
// net.ipv6.route.mtu_expires does). IPv4 endpoints need none (the Bind's
// IPv4 header has DF clear: routers fragment it) and are ignored. It
// returns false, changing nothing, when pathmtu.MaxEntries (4,096)
// endpoints have one already. Sends from the next batch on use it. Safe
// for concurrent use; it copies the table (a cost per change, not per
// datagram).
func (b *Bind) SetPathMTU(dst netip.Addr, mtu int) bool { return b.pathMTU.Set(dst, mtu) }

// PathMTUs returns a copy of the path MTUs SetPathMTU set, by endpoint
// address (nil: none). Safe for concurrent use.
func (b *Bind) PathMTUs() map[netip.Addr]int { return b.pathMTU.All() }

// Sends reports whether the Bind sends from src and the UDP port port now:
// src one of its addresses (SetAddrs), port its listen port. Safe for
// concurrent use.
func (b *Bind) Sends(src netip.Addr, port uint16) bool {
	return port == uint16(b.port.Load()) && b.local.Load().has(src.Unmap())
}
