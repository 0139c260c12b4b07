package fastpath

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// Frames waiting for a LAN neighbour to resolve: at most maxNeighbourWait
// per worker (so they can never drain the queue's buffers), retried every
// neighbourRetry, dropped (no_neighbour) after neighbourWaitMax.
const (
	maxNeighbourWait = 256
	neighbourRetry   = time.Millisecond
	neighbourWaitMax = 3 * time.Second
)

// Control-plane packets (handshake messages, cookie replies, keepalives)
// whose WAN next hop has no MAC yet wait too, complete but for the
// destination MAC: at most maxControlWait per worker, retried with the LAN
// waits, dropped after neighbourWaitMax (no_neighbour, or no_wan_route when
// the WAN has no route toward the endpoint: WANRoutes).
const maxControlWait = 64

type ctlWaiting struct {
	f     dataplane.Frame // the whole frame; destination MAC written when resolved
	dst   netip.Addr      // the endpoint address (the resolver finds its next hop)
	since time.Time
	peer  *Peer // the message's peer (nil: none), whose tx_bytes count it once sent
	n     int   // the message's bytes (UDP payload)
}

// waitControl holds f, a control-plane frame of wanTX's pool, until the WAN
// next hop toward dst resolves. It takes f. peer and n are the message's
// (ctlWaiting), counted in the peer's tx_bytes only if it is sent.
func (w *worker) waitControl(f *dataplane.Frame, dst netip.Addr, peer *Peer, n int) {
	if len(w.ctlWait) >= maxControlWait {
		// As flushControlWait judges one that waited too long: a
		// destination without a route out of the WAN is no_wan_route
		// (and told to the WANRoutes, which may log it), not a next
		// hop that does not answer.
		if r, ok := w.e.cfg.WANResolver.(WANRoutes); ok && !r.HasRoute(dst) {
			w.count(DropNoWANRoute, 1)
		} else {
			w.count(DropNoNeighbour, 1)
			w.countSent(peer, n)
		}
		w.wanTX.Free(unsafeOne(f))
		return
	}
	w.ctlWait = append(w.ctlWait, ctlWaiting{f: *f, dst: dst, since: time.Now(), peer: peer, n: n})
	*f = dataplane.Frame{}
	w.setHeld()
}

// countSent adds n bytes, a control-plane message's, to peer's tx_bytes
// (nil: none): once the WAN port took it (sentControl), or once it was
// dropped for want of its next hop's MAC with a route toward it
// (no_neighbour: an ARP or NDP unanswered, or too many waiting), as
// Linux's WireGuard counts such a message, its socket having taken it
// before the neighbour layer dropped it. One without a route
// (no_wan_route) is counted nowhere, as the kernel's failed route lookup
// fails the send.
func (w *worker) countSent(peer *Peer, n int) {
	if peer != nil {
		pl := w.peerState(peer)
		addTx(pl, n)
		w.markDirty(pl)
	}
}

// flushControlWait sends the control-plane frames whose WAN next hop
// resolved and drops those that waited too long.
func (w *worker) flushControlWait(t time.Time) {
	keep := w.ctlWait[:0]
	for _, cw := range w.ctlWait {
		mac, ok := w.e.cfg.WANResolver.Resolve(cw.dst)
		switch {
		case ok:
			f := cw.f
			copy(f.Data()[:6], mac[:])
			w.c.controlSent.Add(1)
			w.sentControl(unsafeOne(&f), cw.peer, cw.n)
		case t.Sub(cw.since) > neighbourWaitMax:
			why := DropNoNeighbour
			if r, ok := w.e.cfg.WANResolver.(WANRoutes); ok && !r.HasRoute(cw.dst) {
				why = DropNoWANRoute
			}
			w.count(why, 1)
			w.wanTX.Free(unsafeOne(&cw.f))
			if why == DropNoNeighbour {
				w.countSent(cw.peer, cw.n)
			}
		default:
			keep = append(keep, cw)
		}
	}
	clear(w.ctlWait[len(keep):])
	w.ctlWait = keep
}

type nbrWaiting struct {
	f       dataplane.Frame // the inner IP packet, Ethernet not yet added; over the LAN MTU at arrival: IPv4 without DF (overLANMTU)
	dst     netip.Addr
	v6      bool
	counted bool // in dst's neighbour cache slot (nbrHold)
	since   time.Time
}

// nbrEntry is a slot of a worker's neighbour cache: addr's MAC until
// expires, and the number of frames for addr counted by nbrHold and not
// yet released (waiting): in w.nbrWait, or between inbound's first pass
// and its third. While
// waiting is not 0 the slot is addr's (another address that hashes to it
// is resolved without being cached), and frames for addr join the wait
// behind the others: Linux sends a neighbour's queued packets first (its
// arp_queue), and so does flushNeighbourWait, in their order, so a flow's
// first packets to a LAN host are never overtaken by the next ones when
// the MAC comes between them.
type nbrEntry struct {
	addr netip.Addr
	mac  [6]byte
	// waiting counts the frames held for addr: those of the wait and
	// those of the burst on its way to it (nbrHold counts them in the
	// first pass, waitNeighbour releases what the wait has no room for:
	// at most maxNeighbourWait plus a burst, within a uint16)
	waiting uint16
	expires int64
}

// nbrWaiting reports whether frames for dst wait for its MAC (inbound's
// first pass sends dst's next frames to wait behind them).
func (w *worker) nbrWaiting(dst netip.Addr) bool {
	if w.nbrWaitN == 0 {
		return false
	}
	e := &w.nbr[nbrHash(dst)&(nbrCacheSize-1)]
	return e.waiting != 0 && e.addr == dst
}

// nbrHold counts a frame for dst that will wait (inbound's first pass, at
// its verdict, so that the burst's next frames for dst wait too), each
// frame once, also one that joins a wait already begun: in dst's slot,
// unless the slot counts another address's frames (then dst's order is
// not kept: two addresses waiting at once in one of nbrCacheSize slots).
// It reports whether it counted the frame: only a counted frame is
// released (nbrRelease), so a frame that leaves never uncounts another.
func (w *worker) nbrHold(dst netip.Addr) (counted bool) {
	e := &w.nbr[nbrHash(dst)&(nbrCacheSize-1)]
	if e.waiting == 0 {
		*e = nbrEntry{addr: dst}
	}
	if e.addr != dst {
		return false
	}
	e.waiting++
	w.nbrWaitN++
	return true
}

// nbrRelease uncounts a frame for dst that nbrHold counted and that no
// longer waits (sent, or dropped).
func (w *worker) nbrRelease(dst netip.Addr) {
	e := &w.nbr[nbrHash(dst)&(nbrCacheSize-1)]
	if e.waiting != 0 && e.addr == dst {
		e.waiting--
		w.nbrWaitN--
	}
}

// waitDst is the destination of the inner IP packet in f, a frame of
// inbound with the verdict innerNoNeighbour.
func (w *worker) waitDst(f *dataplane.Frame) netip.Addr {
	header.ParseL3(f.Data(), &w.pkt)
	return w.pkt.Dst
}

const nbrCacheSize = 256 // power of 2

// waitNeighbour holds f (an inner IP packet, checked by the first pass,
// Ethernet not yet added) while the resolver asks for its destination's MAC
// address, or counts its drop when too many wait already. counted is
// nbrHold's answer for f. f is zeroed when held.
func (w *worker) waitNeighbour(f *dataplane.Frame, counted bool, bad *[NumDropReasons]int32) {
	dst := w.waitDst(f) // rare
	if len(w.nbrWait) >= maxNeighbourWait {
		bad[DropNoNeighbour]++
		if counted {
			w.nbrRelease(dst)
		}
		return
	}
	w.nbrWait = append(w.nbrWait, nbrWaiting{f: *f, dst: dst, v6: dst.Is6(), counted: counted, since: time.Now()})
	*f = dataplane.Frame{}
	w.setHeld()
}

// flushNeighbourWait sends the frames whose neighbour resolved, in their
// order, and drops those that waited too long (answered "host
// unreachable" into the tunnel); it asks again at most every
// neighbourRetry. A frame over the LAN MTU of now (which may have been
// lowered while it waited) is handled as toLANOverMTU handles an arrival:
// IPv4 without DF cut into fragments, IPv4 with DF and IPv6 dropped
// (lan_too_big) and answered into the tunnel with "fragmentation needed" /
// "packet too big" (RFC 1812 §4.3.2.7, RFC 4443 §3.2).
func (w *worker) flushNeighbourWait(now int64) {
	t := time.Now()
	if t.Sub(w.nbrTried) < neighbourRetry {
		return
	}
	w.nbrTried = t
	if len(w.ctlWait) > 0 {
		w.flushControlWait(t)
	}
	out := w.out[:0]
	keep := w.nbrWait[:0]
	mtu := int(w.e.lanMTU.Load())
	for _, nw := range w.nbrWait {
		mac, ok := w.lanNeighbour(nw.dst, now)
		switch {
		case ok && mtu > 0 && nw.f.Len() > mtu && (nw.v6 || header.IPv4(nw.f.Data()).DontFragment()):
			// Over a LAN MTU lowered while it waited (SetLANMTU):
			// answered and dropped as an arrival of now would be
			// (toLANOverMTU).
			if nw.counted {
				w.nbrRelease(nw.dst)
			}
			w.mtuErrorTunnel(nw.f.Data(), mtu, now)
			w.count(DropLANTooBig, 1)
			w.wanRX.Free(unsafeOne(&nw.f))
		case ok && mtu > 0 && nw.f.Len() > mtu:
			// IPv4 without DF over the LAN MTU (overLANMTU): cut
			// into fragments, after the frames before it.
			if nw.counted {
				w.nbrRelease(nw.dst)
			}
			w.transmit(w.lanTX, out)
			out = out[:0]
			if f := nw.f; !w.fragmentToLAN(&f, mac, mtu) {
				w.count(DropLANTooBig, 1)
				w.wanRX.Free(unsafeOne(&f))
			}
		case ok:
			if nw.counted {
				w.nbrRelease(nw.dst)
			}
			f := nw.f
			et := uint16(header.EtherTypeIPv4)
			if nw.v6 {
				et = header.EtherTypeIPv6
			}
			w.putLANEthernet(&f, mac, et)
			out = append(out, f)
		case t.Sub(nw.since) > neighbourWaitMax:
			// The neighbour did not answer: dropped, and answered
			// into the tunnel with "host unreachable" / "address
			// unreachable", as Linux answers each packet its
			// neighbour entry held when resolution fails
			// (arp_error_report, ndisc_error_report; RFC 1812
			// §5.2.7.1, RFC 4443 §3.1 code 3), rate limited.
			if nw.counted {
				w.nbrRelease(nw.dst)
			}
			w.count(DropNoNeighbour, 1)
			w.icmpTunnel(nw.f.Data(), icmpError{kind: icmpUnreachable}, now)
			w.wanRX.Free(unsafeOne(&nw.f))
		default:
			keep = append(keep, nw)
		}
		if len(out) == cap(out) {
			w.transmit(w.lanTX, out)
			out = out[:0]
		}
	}
	w.nbrWait = keep
	w.setHeld()
	w.transmit(w.lanTX, out)
}

// lanNeighbour returns the MAC of the LAN next hop toward dst, from the
// worker's cache or, on a miss, the LAN resolver.
func (w *worker) lanNeighbour(dst netip.Addr, now int64) ([6]byte, bool) {
	h := nbrHash(dst)
	e := &w.nbr[h&(nbrCacheSize-1)]
	if e.addr == dst && now < e.expires {
		return e.mac, true
	}
	mac, ok := w.e.cfg.LANResolver.Resolve(dst)
	if !ok {
		return mac, false
	}
	switch {
	case e.waiting == 0:
		*e = nbrEntry{addr: dst, mac: mac, expires: now + int64(NeighbourCacheTTL)}
	case e.addr == dst: // its waiting frames keep their count
		e.mac, e.expires = mac, now+int64(NeighbourCacheTTL)
	}
	return mac, true
}

func nbrHash(a netip.Addr) uint32 {
	if a.Is4() {
		b := a.As4()
		return binary.BigEndian.Uint32(b[:]) * 0x9e3779b1 >> 8
	}
	b := a.As16()
	x := binary.BigEndian.Uint64(b[8:]) ^ binary.BigEndian.Uint64(b[:8])
	return uint32((x * 0x9e3779b97f4a7c15) >> 40)
}

// ICMPv6 types of RFC 4861 §4.3 and §4.4.
const (
	ndpNeighbourSolicitation  = 135
	ndpNeighbourAdvertisement = 136
)

// neighbour hands an ARP/NDP frame (with an Ethernet header of l2 bytes,
// see neighbourL2) to h and transmits its reply on tx, a port of vlan. h
// reads and writes untagged frames: a tag is taken off the request in
// place (the addresses moved up over it; the caller frees the frame
// after) and the port's tag put on the reply.
func (w *worker) neighbour(h NeighbourHandler, tx dataplane.TX, frame []byte, l2 int, vlan uint16) {
	w.c.neighbour.Add(1)
	if l2 != header.EthernetLen {
		copy(frame[header.VLANTagLen:header.EthernetVLANLen-2], frame[:header.EthernetLen-2])
		frame = frame[header.VLANTagLen:]
	}
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	f.SetLen(f.Len() + f.Tailroom() - header.VLANTagLen)
	n := h.Handle(frame, f.Data())
	if n <= 0 {
		tx.Free(fr[:])
		return
	}
	f.SetLen(n)
	if vlan != 0 && !tagFrame(f, vlan) {
		w.count(DropNoBuffer, 1)
		tx.Free(fr[:])
		return
	}
	w.transmit(tx, fr[:])
}
