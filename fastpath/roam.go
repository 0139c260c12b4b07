package fastpath

import (
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
)

// Roaming (whitepaper §2.1): the endpoint follows the outer source of
// the latest authenticated packet.

// sawSource notes the outer source of a run of accepted packets from the
// peer of pl (frame f, described by m, its outer headers m.back bytes in
// front of its data): if it is not the peer's endpoint, it is a candidate
// for roaming (whitepaper §2.1: the endpoint becomes the source of the
// latest authenticated packet, and our address it was sent to becomes
// the endpoint's Src, as Linux's WireGuard keeps it: wanaddrs.go), which
// publish acts on. From the endpoint but to another of our addresses
// than its Src (the peer's Endpoint edited to another of ours), the Src
// moves at once (localMoved), as Linux's WireGuard sets the source on
// every authenticated packet: a reply from the previous address, within
// the publish interval, made a stock peer, which follows the source of
// what it authenticates, go back to it.
//
// Toward a peer we spread our source ports over (SrcPorts > 1: a peer that
// spreads its own, as two wgpio gateways configured alike do, and not
// behind NAT: README, SourcePorts), a source that differs from the
// endpoint in its port only is not a candidate: such a peer sends each
// inner flow from a port of its own, and following them moved the
// endpoint, hence the outer destination port of every flow toward the
// peer, each time a flow of its started, so that the peer's RSS moved
// those flows to another receive queue mid-flow and reordered them
// (TestWgpioToWgpioSourcePorts, TestPortOnlyNoRoamWhenSpread). A new
// address still roams, and a handshake sets the endpoint (port
// included) as for any peer (gateway: setEndpointFromLocked), which is
// how a change of the peer's listen port is followed.
//
// A new source of a peer whose endpoint no worker has seen for seenQuiet
// (endpointQuiet: the peer moved, its old address silent) becomes the
// endpoint at once, at the engine clock's now, not at the next publish:
// what we send the peer meanwhile (the answer to the packet that moved
// it, within the same millisecond) went to the old address, where a
// roamed peer no longer is, and was lost uncounted (a ping after a
// change of the peer's address or port: one in two such first answers),
// where Linux's WireGuard sets the endpoint from every authenticated
// packet. An endpoint seen within seenQuiet (two sources live at once,
// a peer spreading its ports) is left to publish, as before.
func (w *worker) sawSource(pl *peerLocal, f *dataplane.Frame, m *rxMeta, now int64) {
	outer := *f
	d := outer.Prepend(int(m.back))
	// Where the peer sent it (authenticate checked it is ours): the
	// endpoint keeps it as our source toward the peer (wanaddrs.go).
	dst := outerDst(d)
	if ep := pl.peer.Endpoint.Load(); ep != nil && (ep.Dst == m.src ||
		pl.peer.SrcPorts > 1 && ep.Dst.Addr() == m.src.Addr()) {
		if ep.Src != dst || ep.Routed {
			w.localMoved(pl.peer, ep, dst)
		}
		pl.sawCurrent = true
		return
	}
	if pl.sawCurrent && pl.lastSrc.IsValid() {
		return
	}
	pl.lastSrc, pl.lastDst, pl.lastSrcMAC = m.src, dst, [6]byte(d[6:12])
	if !pl.sawCurrent && endpointQuiet(pl.peer, now) {
		w.roamNow(pl, now)
	}
}

// roamNow moves pl's peer to the source sawSource noted (roam) and marks
// it seen, so that other workers leave it there (seenElsewhere,
// endpointQuiet); the rest of the interval's packets from it count as
// the endpoint's (sawCurrent). Once per move, not per packet.
//
//go:noinline
func (w *worker) roamNow(pl *peerLocal, now int64) {
	w.roam(pl)
	w.markSeen(pl.peer, now)
	pl.lastSrc = netip.AddrPort{}
	pl.sawCurrent = true
}

// localMoved points the endpoint ep of p, the source of an authenticated
// packet sent to our address dst (one of w.wan's), at dst as its Src, and
// marks it heard from (not Routed). Once per change, not per packet: not
// inlined, out of sawSource's way. A concurrent change of the endpoint
// (a roam, the control plane's) wins.
//
//go:noinline
func (w *worker) localMoved(p *Peer, ep *Endpoint, dst netip.Addr) {
	n := *ep
	n.Src, n.Routed = w.wan.source(dst, ep.Dst.Addr()), false
	p.Endpoint.CompareAndSwap(ep, &n)
}

// roam makes the candidate sawSource noted for pl's peer (its source,
// our address it was sent to, the last hop's MAC unless the WAN resolver
// knows the source's or has no route toward it) the peer's endpoint.
// publish calls it once an interval in which nothing authenticated came
// from the current endpoint, here or at another worker.
func (w *worker) roam(pl *peerLocal) {
	// An address the WAN lost since the packet came is not sent from.
	ep := &Endpoint{Dst: pl.lastSrc, Src: w.e.wan.Load().source(pl.lastDst, pl.lastSrc.Addr()), SrcMAC: w.wanMAC}
	if mac, ok := w.e.cfg.WANResolver.Resolve(pl.lastSrc.Addr()); ok {
		ep.DstMAC = mac
	} else if r, ok := w.e.cfg.WANResolver.(WANRoutes); !ok || r.HasRoute(pl.lastSrc.Addr()) {
		// The frame came from this MAC: the last hop toward the source.
		ep.DstMAC = pl.lastSrcMAC
	}
	// Else no route leads out of the WAN toward the source (a blackhole,
	// an unreachable route, none): no MAC, so that the workers hold the
	// peer's packets and the control plane resolves the endpoint once a
	// route comes (NeedNeighbour), as wg0's route lookup on every send
	// sends nothing there, and as the control plane answers a handshake
	// from such a source (gateway's dstMACFor). Before, the last hop's MAC
	// sent the packets of the interval before the next tick took it back.
	pl.peer.Endpoint.Store(ep)
}
