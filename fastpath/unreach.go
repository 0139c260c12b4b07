package fastpath

import (
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// noPeer takes outbound's packet in f (w.pkt parsed it; the Ethernet
// header, w.pkt.L3Off bytes, still in front) whose destination no peer's
// allowed IPs hold: the prefixes of a removed peer, which the LAN's XDP
// program keeps redirecting so that they do not leak (gateway/fastgw),
// or a snapshot's race. A Linux router's route into wg0 still takes such a
// packet, so it is handled as ip_forward and wg_xmit handle it, in their
// order: TTL / hop limit 1, time exceeded (DropTTLExceeded); over the
// tunnel MTU with DF or IPv6, fragmentation needed / packet too big
// (DropTooBig); otherwise host unreachable / address unreachable, about
// the packet with its hop taken (IPv4 without DF over the MTU: about its
// first fragment, the one Linux may answer), DropNoRoute. The answer goes
// to a LAN host (fromLAN) or, for a peer's packet turned back into the
// tunnel (hairpin.go), into the tunnel. An IPv6 packet while the tunnel
// carries none (Engine.no6; outbound routes it here) is answered "no
// route to destination" at once, as Linux answers it once it removed the
// routes into its wg0 (ip6_pkt_drop, before any hop or size check),
// DropIPv6Off. It returns the reason to count;
// the caller drops f, trimmed here to its IP packet. Not inlined: a rare
// path, kept out of outbound's loop.
//
//go:noinline
func (w *worker) noPeer(f *dataplane.Frame, fromLAN bool, now int64) DropReason {
	l3 := w.pkt.L3Off
	f.TrimFront(l3)
	f.SetLen(w.pkt.L3End - l3)
	p := f.Data()
	if p[0]>>4 != header.IPv4Version && w.e.no6() {
		w.answer(f, l3, fromLAN, icmpError{kind: icmpNoRoute}, now)
		return DropIPv6Off
	}
	if routerWork && !header.Forward(p) {
		w.answer(f, l3, fromLAN, icmpError{kind: icmpTimeExceeded}, now)
		return DropTTLExceeded
	}
	if mtu := w.e.cfg.MTU; len(p) > mtu {
		if p[0]>>4 != header.IPv4Version || header.IPv4(p).DontFragment() {
			w.answer(f, l3, fromLAN, icmpError{kind: icmpTooBig, mtu: mtu}, now)
			return DropTooBig
		}
		fr := &w.fwd.frag
		if fr.Reset(p, mtu) != header.OK {
			return DropTooBig
		}
		f.SetLen(fr.PutFirst())
	}
	w.answer(f, l3, fromLAN, icmpError{kind: icmpUnreachable}, now)
	return DropNoRoute
}

// noEndpoint answers outbound's packet in f (its IP packet, the LAN's
// Ethernet header in front, hop taken) for a peer without an endpoint with
// host unreachable / address unreachable, as Linux's WireGuard answers it
// (wg_xmit, -EDESTADDRREQ): at once, where a peer with an endpoint and no
// session holds it for the handshake (held.go). fromLAN as noPeer's. The
// caller drops and counts f (DropNoEndpoint). Not inlined: a rare path.
//
//go:noinline
func (w *worker) noEndpoint(f *dataplane.Frame, fromLAN bool, now int64) {
	w.answer(f, w.lanL2, fromLAN, icmpError{kind: icmpUnreachable}, now)
}

// answer sends e about the IP packet in f (l2 bytes of Ethernet before
// it) back the way it came: toward the LAN host (fromLAN) or into the
// tunnel.
func (w *worker) answer(f *dataplane.Frame, l2 int, fromLAN bool, e icmpError, now int64) {
	if fromLAN {
		w.icmpErrorToLAN(f, l2, e, now)
		return
	}
	w.icmpTunnel(f.Data(), e, now)
}

// no6 reports whether the tunnel carries no IPv6: its MTU is below
// MinMTU6, IPv6's minimum link MTU (RFC 8200 §5), where Linux turns IPv6
// off on its wg0 (DropIPv6Off says what becomes of such packets). The
// MTU does not change after New, so neither does the answer.
func (e *Engine) no6() bool { return e.cfg.MTU < MinMTU6 }
