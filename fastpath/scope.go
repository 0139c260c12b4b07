package fastpath

import (
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// A transit IPv6 packet from a link-local source (fe80::/10) may not leave
// the link it came from (RFC 4291 §2.5.6). Linux's ip6_forward judges it
// after the hop limit (time exceeded first) and, when the packet would
// leave by another interface than the one it came in by, drops it and
// answers "destination unreachable, beyond scope of source address" (RFC
// 4443 §3.1 code 2), rate-limited as its other errors; a packet that
// leaves by the interface it came in by (its redirect branch) is not
// judged so and goes on, which for wg0 is a peer's packet for another
// peer (hairpin.go). The gateway does the same: the drop is counted as
// martian (ttl_exceeded at hop limit 0 or 1), the error goes back the way
// the packet came, from the LAN's link-local address to a LAN host, from
// the tunnel address (and only it) into the tunnel (icmpSources). As on
// Linux 6.18 (seen in namespaces, wg0 stood for by a TUN without a
// link-local address).

// beyondScope reports whether transitChecks refused the IP packet p
// (header checked) as a martian for its link-local source alone
// (header.TransitBeyondScope). A rare path.
func beyondScope(p []byte) bool { return header.TransitAddrs(p) == header.TransitBeyondScope }

// linkLocalDest reports whether the IP packet p is IPv6 to a link-local
// address (fe80::/10). Out of the tunnel Linux answers such a packet "no
// route to destination" (ICMPv6 type 1 code 0, RFC 4443 §3.1), from the
// tunnel address: its route lookup keeps a link-local destination to the
// interface the packet came in by (ip6_route_input, rt6_need_strict), and
// wg0 has no link-local prefix. (From the LAN, whose interface has one,
// Linux drops it unanswered.)
func linkLocalDest(p []byte) bool {
	return p[0]>>4 == header.IPv6Version && p[24] == 0xfe && p[25]&0xc0 == 0x80
}

// refused handles outbound's packet in f (its IP packet ip, parsed into
// w.pkt, the Ethernet header still in front) that transitChecks refused
// for why, as Linux does: a LAN host's packet dropped for its options
// gets parameter problem where Linux sends one (optionsDrop), one from a
// link-local source time exceeded at hop limit 0 or 1 (counted
// ttl_exceeded) or "beyond scope of source address" (counted martian).
// It returns the reason to count the drop by, or ok for a packet to
// forward all the same: one from a link-local source that inbound sends
// back into the tunnel (fromLAN false). Not inlined: a rare path, kept
// out of outbound's loop.
//
//go:noinline
func (w *worker) refused(f *dataplane.Frame, ip []byte, why DropReason, fromLAN bool, now int64) (DropReason, bool) {
	switch {
	case why == DropIPOptions && fromLAN: // parameter problem (optionserr.go)
		w.optionsDrop(f, w.pkt.L3Off, w.pkt.L3End-w.pkt.L3Off, now)
	case why == DropMartian && beyondScope(ip):
		if !fromLAN {
			return 0, true
		}
		l3 := w.pkt.L3Off
		f.TrimFront(l3)
		f.SetLen(w.pkt.L3End - l3)
		if ip[7] <= 1 {
			w.icmpErrorToLAN(f, l3, icmpError{kind: icmpTimeExceeded}, now)
			return DropTTLExceeded, false
		}
		w.icmpErrorToLAN(f, l3, icmpError{kind: icmpBeyondScope}, now)
	}
	return why, false
}

// scopeVerdict is inbound's first-pass verdict on the decrypted packet ip
// (snapshot rt; w.pkt parsed it, the hop taken unless its hop limit was 0
// or 1) from a link-local source (beyondScope): innerDeliver (go on) for
// one to our own address with an exception interface (exc: Linux delivers
// it locally), at hop limit 0 or 1 (time exceeded follows) or whose route
// leads back into the tunnel (lanRoute: peer to peer, which Linux
// forwards); else innerScope, the hop put back (Linux answers before it
// lowers the hop limit, and the error quotes the packet as received).
func (w *worker) scopeVerdict(rt *routeTable, ip []byte, exc bool, now int64) innerVerdict {
	dst := w.pkt.Dst
	if exc && isOwn(rt, dst) || w.pkt.TTL <= 1 || w.lanRoute(rt, dst, now) == routeTunnel {
		return innerDeliver
	}
	w.undoHop(ip)
	return innerScope
}
