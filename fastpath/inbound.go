package fastpath

import (
	"encoding/binary"
	"net/netip"

	"github.com/wgpio/wgpio/chachapoly"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// inbound handles one burst from the WAN: hand handshakes to the control
// plane, open transport data in place, check replay once per keypair per
// batch, check allowed IPs, and transmit the inner packets on the LAN.
//
// Frame disposition: a frame handed on (to the LAN TX batch, or held for a
// neighbour) is zeroed in w.frames; every frame still non-zero at the end —
// a counted drop, or one consumed here (handshake message copied to the
// control plane, keepalive, exception packet, ARP/NDP) — is freed in one
// call.
func (w *worker) inbound(now int64) int {
	n := w.wanRX.Receive(w.frames[:w.burst])
	if n == 0 {
		return 0
	}
	w.inboundBurst(w.frames[:n], now)
	w.inboundReassembled(now) // reassemble.go
	return n
}

// inboundBurst handles frames received on the WAN (see inbound).
func (w *worker) inboundBurst(frames []dataplane.Frame, now int64) {
	if c := w.capture.Load(); c != nil {
		c.put(w.id, CaptureWAN, CaptureRX, frames)
	}
	var bad [NumDropReasons]int32
	// A burst from many sessions of a gateway with many has their state
	// loaded first (inahead.go).
	if len(frames) <= len(w.in.idx) && w.e.indexes.Len() >= w.e.inAheadMin {
		w.inboundAhead(frames)
	} else {
		w.in.many = false
	}
	// Frames consumed here (handshakes, keepalives, exception), freed with
	// the drops.
	left := w.authenticate(frames, &bad, now)
	w.replayCheck(len(frames))
	out, consumed := w.deliver(frames, &bad, now)
	w.freeRest(w.wanRX, frames, &bad, left+consumed)
	w.transmit(w.lanTX, out)
	if len(w.hair) > 0 {
		w.hairpinBurst(now) // peer to peer (hairpin.go)
	}
	// No keypair stays past the burst (deliver clears each m.kp it
	// reads): one the control plane zeroes must not stay reachable from
	// an idle worker (key hygiene).
}

// rxMeta is what inbound's first pass learnt of an authenticated transport
// packet, for its third.
type rxMeta struct {
	kp       *Keypair       // nil: not authenticated (dropped or consumed)
	src      netip.AddrPort // outer source
	plainLen int32          // plaintext length, with the sender's padding
	back     int32          // from the frame's data start back to the outer Ethernet header
	verdict  innerVerdict
	ecn      uint8 // the outer header's ECN field (RFC 6040 decapsulation)
	// With verdict innerNoNeighbour (also a packet over the LAN MTU that
	// will be fragmented, overLANMTU): whether nbrHold counted the frame in
	// its destination's neighbour cache slot (what releases it uncounts).
	nbrCounted bool
}

// openMeta is what authenticate keeps of a transport message queued for
// opening: its frame, where the ciphertext starts in the frame's data, its
// counter and session (the outer source goes to the frame's rxMeta).
type openMeta struct {
	frame int32
	off   int32 // ciphertext start in the frame's data
	plain int32 // plaintext length (with the sender's padding)
	c     uint64
	kp    *Keypair
}

// innerVerdict is what the first pass found in an authenticated packet's
// plaintext, acted on after the replay check.
type innerVerdict uint8

const (
	innerDeliver      innerVerdict = iota // ready for the LAN: trimmed to its IP length, Ethernet in front
	innerKeepalive                        // empty: a keepalive (whitepaper §6.5)
	innerMalformed                        // not a well-formed IP packet
	innerForeign                          // source outside the peer's allowed IPs (whitepaper §2)
	innerOwn                              // for the gateway's own tunnel address (trimmed, no Ethernet)
	innerNoNeighbour                      // next hop not resolved yet (trimmed, no Ethernet)
	innerTTLExceeded                      // would leave with TTL / hop limit 0 (trimmed, no Ethernet)
	innerOverLANMTU                       // larger than the LAN MTU (trimmed, no Ethernet)
	innerMartian                          // an address no router forwards (transitAddrs)
	innerNoRoute                          // to an IPv6 link-local address (scope.go; hop put back)
	innerScope                            // from a link-local source, beyond its link (scope.go; hop put back, trimmed, no Ethernet)
	innerMulticast                        // to a multicast or broadcast address, without an exception interface
	innerOptions                          // options Linux does not forward (headerOptions)
	innerHairpin                          // back into the tunnel, to another peer or the same (hairpin.go; hop put back, LAN Ethernet in front)
	innerTunnelTooBig                     // back into the tunnel but over its MTU, DF or IPv6 (trimmed, no Ethernet)
	innerHost                             // for the host's kernel to forward: its route leads off the LAN (hairpin.go; hop put back, trimmed, no Ethernet)
	innerOffLAN                           // the same without an exception interface
	innerIPv6Off                          // IPv6 in a tunnel below 1280 (DropIPv6Off)
)

// authenticate is inbound's first pass: parse, look up the receiver index,
// open the burst's transport messages in place with one chachapoly.Open
// call, and prepare each authentic inner packet for the LAN (its IP header,
// allowed IPs, Ethernet toward the next hop; a neighbour it misses is asked for even if the packet turns out to be a
// replay). What it finds is acted on by deliver, after the replay check. It
// fills w.meta and w.counters for each frame and returns the number of
// frames it consumed (handshake messages, ARP/NDP).
func (w *worker) authenticate(frames []dataplane.Frame, bad *[NumDropReasons]int32, now int64) (left int) {
	meta := w.meta[:len(frames)]
	counters := w.counters[:len(frames)]
	rt := w.e.routes.Load()
	var (
		idxRun   uint32
		idxRunKp *Keypair // the live keypair of idxRun
		// and its receive key, taken where the keypair is known not to
		// be nil: &kp.receive per message made the compiler check kp
		// for nil by loading its first line, which nothing else of the
		// inbound path reads (inahead.go)
		idxRunKey *chachapoly.Key
		// The last inner source and the peer its allowed IPs name, and
		// the last destination resolved with its MAC address: a burst is
		// mostly a few flows.
		lastSrc     netip.Addr
		lastSrcPeer *Peer
		lastDst     netip.Addr
		lastMAC     [6]byte
		// The last of the WAN's further addresses a datagram was sent
		// to (otherWAN, wanaddrs.go).
		lastWAN netip.Addr
	)
	// What the loops read of the configuration, loaded once per burst.
	wanNb, exc, clamp, lanMTU := w.e.cfg.WANNeighbours, w.e.cfg.Exception, w.e.mss4 != 0, int(w.e.lanMTU.Load())
	w.lanMTU = lanMTU // for toLANOverMTU, in the third pass
	own := len(rt.own) > 0 && exc != nil
	if lanMTU <= 0 { // no limit known: one compare per packet either way
		lanMTU = int(^uint(0) >> 1)
	}
	// Pass 1: parse, look the session up, queue the message for opening.
	// The queues are filled in place: the entries of w.openQ past the
	// burst are zero (cleared after every Open), so only Key, Counter and
	// Data are written.
	q, qm := w.openQ[:0], w.openMeta[:0]
	for i := range frames {
		m := &meta[i]
		m.kp = nil
		f := &frames[i]
		d := f.Data()
		if r := header.Parse(d, &w.pkt); r != header.OK || w.pkt.Proto != header.ProtoUDP || w.pkt.VLANID != w.wanVLAN {
			if r == header.ReasonFragment && w.e.reasm != nil && !foreignVLAN(&w.pkt, w.wanVLAN) {
				left += w.wanFragment(d, bad, &lastWAN, now) // reassemble.go
				continue
			}
			// ARP and NDP are not UDP: looked for only here.
			if wanNb != nil {
				if l2 := neighbourL2(d, w.wanVLAN); l2 != 0 {
					w.neighbour(wanNb, w.wanTX, d, l2, w.wanVLAN)
					left++
					continue
				}
			}
			// Another VLAN's frame is never WireGuard for us (vlan.go).
			if foreignVLAN(&w.pkt, w.wanVLAN) {
				bad[DropWANVLAN]++
			} else {
				bad[DropWANMalformed]++
			}
			continue
		}
		// Our ports are the listen port and the source-port range above
		// it: a peer answers to the port we sent from.
		if w.pkt.DstPort-w.wan.port >= w.portSpan || (w.pkt.Dst != w.wan.addr4 && w.pkt.Dst != w.wan.addr6 &&
			w.pkt.Dst != lastWAN && !w.otherWAN(&lastWAN)) {
			bad[DropNotForUs]++
			continue
		}
		if ip := d[w.pkt.L3Off:]; !header.PlainUnicast(ip) && header.MartianSource(ip) {
			bad[DropWANMartian]++
			continue
		}
		msg := d[w.pkt.PayloadOff : w.pkt.PayloadOff+w.pkt.PayloadLen]
		if routerWork {
			// The outer ECN field (RFC 6040 decapsulation): the low bits
			// of the IPv4 TOS or, 4 bits higher, the IPv6 traffic class
			// in byte 1 (version 4 = 0b100, 6 = 0b110: shift 0 or 4).
			m.ecn = d[w.pkt.L3Off+1] >> (w.pkt.IPVersion & 2 << 1) & 3
		}
		if len(msg) < 4 || msg[1]|msg[2]|msg[3] != 0 {
			bad[DropBadType]++
			continue
		}
		if msg[0] != protocol.TypeTransport {
			if msg[0] >= protocol.TypeInitiation && msg[0] <= protocol.TypeCookieReply {
				w.handshake(f, msg, now) // copies msg; the frame is freed with the rest
				left++
			} else {
				bad[DropBadType]++
			}
			continue
		}
		if len(msg) < protocol.TransportMinSize {
			bad[DropShortData]++
			continue
		}
		// A burst is mostly one session: look its index up once.
		idx, kp := binary.LittleEndian.Uint32(msg[4:8]), idxRunKp
		if idx != idxRun || kp == nil {
			if kp = w.e.indexes.Lookup(idx); kp == nil {
				bad[DropUnknownIndex]++
				continue
			}
			if kp.Dead() || now-kp.Created >= rejectAfterTimeNs {
				bad[DropExpired]++
				continue
			}
			idxRun, idxRunKp, idxRunKey = idx, kp, &kp.receive
		}
		c := binary.LittleEndian.Uint64(msg[8:16])
		if c >= protocol.RejectAfterMessages {
			bad[DropCounterLimit]++
			continue
		}
		k := len(q)
		if k < cap(q) && k < cap(qm) {
			q, qm = q[:k+1], qm[:k+1]
		} else {
			q, qm = append(q, chachapoly.Packet{}), append(qm, openMeta{})
		}
		op, om := &q[k], &qm[k]
		op.Key, op.Counter, op.Data = idxRunKey, c, msg[protocol.TransportHeaderSize:]
		om.frame, om.off = int32(i), int32(w.pkt.PayloadOff+protocol.TransportHeaderSize)
		om.plain, om.c, om.kp = int32(len(msg)-protocol.TransportHeaderSize-protocol.TagSize), c, kp
		m.src = netip.AddrPortFrom(w.pkt.Src, w.pkt.SrcPort)
	}
	// One call authenticates and opens the whole burst (package chachapoly:
	// SIMD lanes); a packet that fails is dropped alone.
	ok := w.openOK[:len(q)]
	chachapoly.Open(q, ok)
	w.sourcesAhead(q, ok) // inahead.go
	clear(q)              // drop the key and buffer references
	srcRoutes := w.srcRoutes
	for k := range qm {
		om := &qm[k]
		i := om.frame
		if !ok[k] {
			bad[DropAuth]++
			continue
		}
		m, f := &meta[i], &frames[i]
		kp := om.kp
		plain := int(om.plain)
		counters[i] = om.c
		m.kp = kp
		m.plainLen = int32(plain)
		m.back = 0
		if plain == 0 {
			m.verdict = innerKeepalive
			continue
		}
		// The frame is trimmed to the plaintext, the IP packet below,
		// its length set on each way out of the loop; the slices are
		// cut from d, the data as received (one look at the frame's
		// pool per packet, not one per step).
		off := int(om.off)
		d := f.Data()
		ip := d[off : off+plain]
		f.TrimFront(off)
		m.back = int32(off)
		// The IP header only: a gateway forwards what its upper layer
		// holds, as a router does. parseInner also applies the outer
		// ECN field and takes the router's hop (TTL / hop limit − 1,
		// router.go), while it holds the header: done there, and not
		// by calls in this loop, the router's work costs the loop no
		// values of its own to keep across calls (scripts/routercost.sh).
		if parseInner(ip, &w.pkt, m.ecn) != header.OK {
			f.SetLen(plain)
			m.verdict = innerMalformed
			continue
		}
		if w.pkt.Src != lastSrc {
			lastSrc = w.pkt.Src
			// IPv4 hits inline, the rest through lookup (nil: no peer).
			// (use here, not before the loop: a burst of handshakes
			// makes no cache.)
			srcRoutes.use(rt) // for find4
			hit := false
			if lastSrc.Is4() {
				b := lastSrc.As4()
				lastSrcPeer, _, hit = srcRoutes.find4(binary.BigEndian.Uint32(b[:]))
			}
			if !hit {
				lastSrcPeer, _ = srcRoutes.lookup(rt, lastSrc)
			}
			// One of the host's own addresses (router.go,
			// transitChecks) is judged here, once per source, and
			// stands for no peer.
			if routerWork && rt.mayOwn(ip) && rt.ownSource(ip) {
				lastSrcPeer = &ownSourcePeer
			}
			// A tunnel below 1280 carries no IPv6 (Engine.no6):
			// judged once per source too, and stands for no peer.
			if lastSrc.Is6() && w.e.no6() {
				lastSrcPeer = &noIPv6Peer
			}
		}
		if lastSrcPeer != kp.Peer {
			f.SetLen(plain)
			switch lastSrcPeer {
			case &ownSourcePeer:
				m.verdict = innerMartian
			case &noIPv6Peer:
				m.verdict = innerIPv6Off
			default:
				m.verdict = innerForeign
			}
			continue
		}
		f.SetLen(w.pkt.L3End) // without the padding
		ip = ip[:w.pkt.L3End]
		dst := w.pkt.Dst
		// Addresses no router forwards (router.go); a multicast or
		// broadcast destination goes to the exception interface, as
		// Linux's wg0 delivers such a packet locally.
		if routerWork && !(plainUnicast(ip) && optionsPlain(ip)) {
			if v := w.notTransit(rt, ip, exc != nil, now); v != innerDeliver {
				m.verdict = v
				continue
			}
		}
		if own && isOwn(rt, dst) {
			if routerWork {
				w.undoHop(ip) // not transit
			}
			m.verdict = innerOwn
			continue
		}
		// A transit packet: forwarded as a router does (router.go).
		// One that came with TTL / hop limit 0 or 1 (parseInner left
		// it alone) is answered with time exceeded, before any MTU or
		// neighbour decision, as Linux does.
		if routerWork && w.pkt.TTL <= 1 {
			m.verdict = innerTTLExceeded
			continue
		}
		if clamp {
			w.clampMSS(ip)
		}
		// Into a peer's allowed IPs, or to the host's kernel when the
		// route leads elsewhere than the LAN (hairpin.go): asked only of
		// a destination not already sent to the LAN in this burst.
		if len(ip) > lanMTU {
			if r := w.lanRoute(rt, dst, now); r != routeLAN {
				m.verdict = w.offLAN(f, m, ip, r, exc != nil)
				continue
			}
			m.verdict, m.nbrCounted = w.overLANMTU(ip, dst, now)
			continue
		}
		if dst != lastDst {
			if r := w.lanRoute(rt, dst, now); r != routeLAN {
				m.verdict = w.offLAN(f, m, ip, r, exc != nil)
				continue
			}
			// Behind frames that wait for the same neighbour
			// (neighbour.go: their order is kept), or waiting.
			if w.nbrWaiting(dst) {
				m.nbrCounted = w.nbrHold(dst)
				m.verdict = innerNoNeighbour
				continue
			}
			mac, ok := w.lanNeighbour(dst, now)
			if !ok {
				m.nbrCounted = w.nbrHold(dst)
				m.verdict = innerNoNeighbour
				continue
			}
			lastDst, lastMAC = dst, mac
		}
		et := uint16(header.EtherTypeIPv4)
		if dst.Is6() {
			et = header.EtherTypeIPv6
		}
		if w.lanVLAN == 0 { // the one VLAN branch of the untagged path
			// In front of the IP packet, where the transport header
			// was (off >= 14); the frame grows over it.
			header.PutEthernet(d[off-header.EthernetLen:off], header.MAC(lastMAC), header.MAC(w.lanMAC), et)
			f.Grow(header.EthernetLen)
			m.back = int32(off - header.EthernetLen)
		} else {
			m.back -= int32(w.putLANEthernet(f, lastMAC, et))
		}
		m.verdict = innerDeliver
	}
	clear(qm) // drop the keypair references
	return left
}

// deliver is inbound's third pass, over the authenticated packets: the
// replay verdict, peer bookkeeping (once per run of one keypair), roaming,
// and the first pass's verdict on the inner packet. It clears each frame's
// keypair (w.meta), leaving none reachable past the burst. It returns the
// frames to transmit and the number of frames it consumed (keepalives,
// exception packets).
func (w *worker) deliver(frames []dataplane.Frame, bad *[NumDropReasons]int32, now int64) (out []dataplane.Frame, left int) {
	meta := w.meta[:len(frames)]
	accepted := w.accepted[:len(frames)]
	out = w.out[:0]
	var (
		dec, host int
		decBytes  uint64
		runKp     *Keypair // per-peer bookkeeping runs once per run of one keypair,
		pl        *peerLocal
		runSrc    netip.AddrPort // and the endpoint check once per run of one source
	)
	for i := 0; i < len(frames); i++ {
		m := &meta[i]
		kp := m.kp
		if kp == nil {
			continue
		}
		m.kp = nil // key hygiene (inboundBurst)
		if !accepted[i] {
			bad[DropReplay]++
			if m.verdict == innerNoNeighbour && m.nbrCounted {
				w.nbrRelease(w.waitDst(&frames[i]))
			}
			continue
		}
		f := &frames[i]
		if kp != runKp {
			runKp, runSrc = kp, netip.AddrPort{}
			pl = w.received(kp, now)
		}
		dec++
		pl.rxBytes += uint64(m.plainLen) + protocol.TransportMinSize
		if m.src != runSrc {
			runSrc = m.src
			w.sawSource(pl, f, m, now)
		}
		// The common verdict first, out of the switch (a jump table
		// past 8 cases: an indirect jump per packet).
		if m.verdict == innerDeliver {
			pl.lastDataReceived = now
			lanL2 := w.lanL2
			decBytes += uint64(f.Len() - lanL2)
			out = append(out, *f)
			*f = dataplane.Frame{}
			// The frames after it of the same keypair and source,
			// accepted and for the LAN (a burst is mostly one such
			// run), in a loop without calls: the same work as above.
			var bytes uint64
			j := i + 1
			for ; j < len(frames); j++ {
				m := &meta[j]
				if m.kp != kp || !accepted[j] || m.verdict != innerDeliver || m.src != runSrc {
					break
				}
				m.kp = nil
				f := &frames[j]
				bytes += uint64(m.plainLen) + protocol.TransportMinSize
				decBytes += uint64(f.Len() - lanL2)
				out = append(out, *f)
				*f = dataplane.Frame{}
			}
			dec += j - i - 1
			pl.rxBytes += bytes
			i = j - 1
			continue
		}
		// Every accepted packet's inner bytes, whatever becomes of it
		// (as Decrypted counts it): its IP length, or as received
		// (with the sender's padding) when its header was not read
		// or its source was refused.
		if m.verdict != innerKeepalive {
			n := f.Len()
			if m.verdict == innerHairpin {
				n -= w.lanL2 // Ethernet in front already
			}
			decBytes += uint64(n)
		}
		switch m.verdict {
		case innerKeepalive:
			w.c.keepalives.Add(1)
			left++ // consumed: freed with the rest
		case innerMalformed:
			bad[DropInnerMalformed]++
		case innerForeign:
			bad[DropAllowedIPs]++
		case innerIPv6Off:
			pl.lastDataReceived = now
			bad[DropIPv6Off]++
		case innerOwn:
			pl.lastDataReceived = now
			w.toHost = append(w.toHost, f.Data())
			w.c.exception.Add(1)
			left++ // consumed: freed with the rest
		case innerNoNeighbour:
			pl.lastDataReceived = now
			w.waitNeighbour(f, m.nbrCounted, bad)
		case innerTTLExceeded:
			pl.lastDataReceived = now
			bad[DropTTLExceeded]++
			w.timeExceededTunnel(f.Data(), now)
		case innerMartian:
			bad[DropMartian]++
		case innerScope:
			bad[DropMartian]++
			w.icmpTunnel(f.Data(), icmpError{kind: icmpBeyondScope}, now)
		case innerNoRoute:
			bad[DropMartian]++
			w.icmpTunnel(f.Data(), icmpError{kind: icmpNoRoute}, now)
		case innerMulticast:
			bad[DropMulticast]++
		case innerOptions:
			bad[DropIPOptions]++
			if e, ok := optionsError(f.Data()); ok {
				w.icmpTunnel(f.Data(), e, now)
			}
		case innerHairpin:
			pl.lastDataReceived = now
			w.hair = append(w.hair, *f)
			*f = dataplane.Frame{}
		case innerTunnelTooBig:
			pl.lastDataReceived = now
			bad[DropTooBig]++
			w.mtuErrorTunnel(f.Data(), w.e.cfg.MTU, now)
		case innerHost:
			pl.lastDataReceived = now
			w.toHost = append(w.toHost, f.Data())
			host++
			left++ // consumed: freed with the rest
		case innerOffLAN:
			pl.lastDataReceived = now
			bad[DropOffLAN]++
		case innerOverLANMTU:
			pl.lastDataReceived = now
			// Its fragments go after the packets before it, in
			// order: those are sent first (a rare path).
			w.transmit(w.lanTX, out)
			out = out[:0]
			w.toLANOverMTU(f, bad, now)
		}
	}
	w.c.decrypted.Add(uint64(dec))
	w.c.decryptedBytes.Add(decBytes)
	if host != 0 {
		w.c.toHost.Add(uint64(host))
	}
	w.handToHost()
	return out, left
}

// received does the per-peer bookkeeping of a run of authenticated,
// accepted packets of kp: it promotes the keypair if it was the next one
// (the responder sends on a session only once data arrived on it,
// whitepaper §5.4.6), stamps the receive time and returns the
// worker's state of the peer.
func (w *worker) received(kp *Keypair, now int64) *peerLocal {
	pl := w.met(kp.Peer) // inline for a peer met before
	if pl == nil {
		pl = w.peerState(kp.Peer)
	}
	// An unconfirmed keypair is promoted from Next only: one moved to
	// Previous (Peer.Rotate) is received on, never sent with, and costs
	// no lock per burst; it is marked received once (Keypair.Used).
	if !kp.Confirmed() && kp.Peer.receivedOn(kp) {
		w.e.Kick() // held packets may go now
	}
	pl.lastReceived = now
	w.markDirty(pl)
	return pl
}

// undoHop puts back what parseInner did to ip as a router's hop, for a
// packet addressed to the gateway itself (not transit). Not inlined: a
// rare path, kept out of authenticate's loop.
//
//go:noinline
func (w *worker) undoHop(ip []byte) { header.UndoHop(ip, &w.pkt) }

// notTransit returns the verdict on the decrypted packet ip (snapshot rt)
// whose addresses or options plainUnicast and optionsPlain did not settle: innerDeliver (meaning: go on) when transitChecks passes it,
// innerMartian, innerNoRoute for a link-local destination (IPv6),
// innerOptions, scopeVerdict's for a link-local source, or
// for a multicast or broadcast destination
// innerOwn (the hop undone) when the gateway has an exception interface
// (exc), innerMulticast when it has none. Not inlined: a rare path, kept
// out of authenticate's loop.
//
//go:noinline
func (w *worker) notTransit(rt *routeTable, ip []byte, exc bool, now int64) innerVerdict {
	why, ok := transitChecks(rt, ip)
	switch {
	case ok:
		return innerDeliver
	case why == DropMartian && beyondScope(ip):
		return w.scopeVerdict(rt, ip, exc, now)
	case why == DropMartian && linkLocalDest(ip):
		w.undoHop(ip)
		return innerNoRoute
	case why == DropMartian:
		return innerMartian
	case why == DropIPOptions:
		w.undoHop(ip) // quoted as received: Linux judges options before the hop
		return innerOptions
	case exc:
		w.undoHop(ip)
		return innerOwn
	}
	return innerMulticast
}

// ownSourcePeer is no peer: authenticate's stand-in for the peer of a
// source that is one of the host's own addresses.
var ownSourcePeer Peer

// noIPv6Peer is no peer: authenticate's stand-in for the peer of an
// IPv6 source while the tunnel carries no IPv6 (Engine.no6), whatever
// its peer's allowed IPs say: Linux's wg0 below 1280 hands such a packet
// to an IPv6 stack it has turned off there (DropIPv6Off).
var noIPv6Peer Peer

func isOwn(rt *routeTable, a netip.Addr) bool {
	_, ok := rt.own[a]
	return ok
}

// handshake copies a handshake message (types 1–3) to the control plane.
// A message that finds the queue full is dropped before it is copied: a
// flood of them costs the worker no allocation (only a message that
// finds the last place taken by another worker in between is copied in
// vain).
func (w *worker) handshake(f *dataplane.Frame, msg []byte, now int64) {
	if len(w.e.handshakes) == cap(w.e.handshakes) {
		w.count(DropHandshakeQueueFull, 1)
		return
	}
	d := f.Data()
	m := HandshakeMessage{
		Queue:    w.id,
		Src:      netip.AddrPortFrom(w.pkt.Src, w.pkt.SrcPort),
		Dst:      netip.AddrPortFrom(w.pkt.Dst, w.pkt.DstPort),
		SrcMAC:   [6]byte(d[6:12]),
		Data:     append([]byte(nil), msg...),
		Received: now,
	}
	select {
	case w.e.handshakes <- m:
		w.c.handshakes.Add(1)
	default:
		w.count(DropHandshakeQueueFull, 1)
	}
}
