package fastpath

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

// hold keeps f (an inner IP packet) until pl's peer has a usable keypair
// and endpoint, and asks the control plane for what is missing at now: a
// handshake (HandshakeNeeded) when the peer has no keypair it may send
// with, or no endpoint; the endpoint's next hop's MAC (NeedNeighbour)
// when that is unknown. A usable keypair whose endpoint only lacks the MAC
// needs no handshake: the control plane resolves the MAC, and flushHeld
// sends with that keypair. A usable keypair whose endpoint has no source
// (the WAN has no address of its family) is not held: f is dropped as
// no_wan_address, as it is with the MAC known.
func (w *worker) hold(pl *peerLocal, f *dataplane.Frame, now int64) {
	p := pl.peer
	if p.Removed.Load() {
		// A batch of the snapshot before the removal.
		w.count(DropPeerRemoved, 1)
		w.lanRX.Free(unsafeOne(f))
		return
	}
	p.FlushHeld.Store(false)
	ep := p.Endpoint.Load()
	kp := p.Current.Load()
	session := kp != nil && kp.canSend(now) && ep != nil
	if !session {
		// Only the first packet held since pl's list was empty wakes
		// the control plane: once it holds some, a handshake is
		// started or in flight (ask).
		w.ask(p, &p.HandshakeNeeded, !pl.sessionAsked)
		pl.sessionAsked = true
	} else if !w.wan.source(ep.Src, ep.Dst.Addr()).IsValid() {
		// A session, but the WAN has no address of the endpoint's
		// family (its last one was removed: the connected route went
		// with it, and the tick may have taken the MAC back for it;
		// the engine's addresses, which change before the control
		// plane moves the endpoint's Src): nothing can leave, as
		// wg0's send fails then; counted as the worker counts such a
		// packet with the MAC known, not held.
		w.count(DropNoWANAddress, 1)
		w.lanRX.Free(unsafeOne(f))
		return
	}
	// Whether this packet starts pl's list: taken before the overflow,
	// which may drop pl's only packet (dropOldest) without emptying
	// (emptied) a list that this one refills at once. Taken after, it
	// listed the peer again and counted it holding once more for every
	// packet while the queue's budget stayed full (Holding then true
	// for good).
	first := len(pl.held) == 0
	if len(pl.held) < MaxHeldPerPeer && w.heldTotal >= w.e.cfg.MaxHeldPerQueue {
		w.evictLargest(pl, now)
	}
	if len(pl.held) >= MaxHeldPerPeer || w.heldTotal >= w.e.cfg.MaxHeldPerQueue {
		// Drop the oldest, as wireguard-go does with its staged queue.
		if len(pl.held) == 0 {
			w.heldOverflow(pl, f.Len(), now)
			w.lanRX.Free(unsafeOne(f))
			return
		}
		w.dropOldest(pl, now)
	}
	if first {
		w.heldPeers = append(w.heldPeers, heldPeer{id: p.ID, since: now})
		p.holding.Add(1)
	}
	pl.held = append(pl.held, *f)
	w.heldTotal++
	w.setHeld()
	if ep != nil && ep.DstMAC == ([6]byte{}) {
		// After Holding: the control plane resolves while both hold
		// (gateway's needNeighbour), and the first packet of a list
		// wakes it even when the flag stayed raised from an earlier
		// wait whose packets went.
		w.ask(p, &p.NeedNeighbour, true)
		if first {
			w.e.stamped.signal()
		}
		if session {
			// The MAC alone: wg0 sent it now, into the route's
			// neighbour entry.
			w.sentForTimers(pl, w.wanRoute(ep), now)
		}
	}
}

// sentForTimers stamps pl's peer as having sent an authenticated packet
// at now, and data when data is set, for its timers (whitepaper §6.5),
// as wg0's wg_packet_create_data_done does for each packet it hands to
// its socket: any authenticated packet whatever the socket answers (no
// passive keepalive then; the persistent keepalive's interval starts
// again), data when the socket took it (a handshake 15 s later if
// nothing comes back), which a neighbour entry's queue does and a send
// without a route does not. For packets held for the endpoint's next
// hop's MAC alone (hold, when each is held; heldOverflow; expireHeld, for
// those held for a session that came without the MAC), which wg0 would
// have sent into the entry. The timers take the first data sent since
// the last receive, so a later stamp does not move them.
func (w *worker) sentForTimers(pl *peerLocal, data bool, now int64) {
	st := w.stamp(now)
	pl.sentAt = st
	if data {
		pl.dataSentAt = st
	}
	w.markDirty(pl)
}

// evictLargest makes room in a full queue budget (MaxHeldPerQueue) for a
// packet of pl's peer: it drops the oldest packet of a peer that holds
// more than pl's would with the new one (counted held_overflow), the one
// holding the most of up to evictScan held peers, taken in turn from a
// cursor that moves on, so that each call costs a bounded scan however
// many peers hold packets. Linux and wireguard-go hold 128 a peer with no
// bound over all peers, so eight peers whose handshakes go unanswered no
// longer keep every other peer's first packets (a SYN, a DNS query) out
// of the queue while they retry: they fill it, but give way.
//
//go:noinline
func (w *worker) evictLargest(pl *peerLocal, now int64) {
	var victim *peerLocal
	n := len(w.heldPeers)
	for range min(n, evictScan) {
		w.evictAt = (w.evictAt + 1) % n
		if v := w.localAt(w.heldPeers[w.evictAt].id); v != pl && (victim == nil || len(v.held) > len(victim.held)) {
			victim = v
		}
	}
	if victim != nil && len(victim.held) > len(pl.held)+1 {
		w.dropOldest(victim, now) // it keeps one at least
	}
}

// evictScan is how many held peers evictLargest looks at.
const evictScan = 16

// dropOldest frees the oldest packet pl holds, counted held_overflow
// (heldOverflow).
func (w *worker) dropOldest(pl *peerLocal, now int64) {
	w.heldOverflow(pl, pl.held[0].Len(), now)
	w.lanRX.Free(pl.held[:1])
	copy(pl.held, pl.held[1:])
	pl.held = pl.held[:len(pl.held)-1]
	w.heldTotal--
}

// heldOverflow counts an inner packet of n bytes of pl's peer for which
// the held lists had no room: held_overflow, and in the peer's tx_bytes
// as a sealed message (sealedLen) while its packets wait for the
// endpoint's next hop's MAC alone with a route toward it, as expireHeld
// counts those that wait too long: Linux's wg0 sent such a packet into
// the route's neighbour entry, whose queue drops the oldest when full
// (unres_qlen_bytes, __neigh_event_send) after the socket counted it;
// and, with a route or not, as sent for the timers (sentForTimers). A
// packet held for a session wg0 never sent.
func (w *worker) heldOverflow(pl *peerLocal, n int, now int64) {
	w.count(DropHeldOverflow, 1)
	if ep := waitsForMAC(pl.peer, now); ep != nil {
		route := w.wanRoute(ep)
		if route {
			addTx(pl, w.sealedLen(n))
		}
		w.sentForTimers(pl, route, now)
	}
}

// wanRoute reports whether the WAN has a route toward ep (WANRoutes; a
// resolver that does not tell has one).
func (w *worker) wanRoute(ep *Endpoint) bool {
	r, ok := w.e.cfg.WANResolver.(WANRoutes)
	return !ok || r.HasRoute(ep.Dst.Addr())
}

// dropHeld frees the packets held for pl's peer, whose ID a new peer
// took (peerState): counted peer_removed when the peer was removed, as
// flushHeld counts them had it run first (the control plane reuses a
// removed peer's ID at once: Engine.assignIDLocked), else held_overflow.
func (w *worker) dropHeld(pl *peerLocal) {
	why := DropHeldOverflow
	if pl.peer.Removed.Load() {
		why = DropPeerRemoved
	}
	w.count(why, len(pl.held))
	w.lanRX.Free(pl.held)
	w.heldTotal -= len(pl.held)
	w.emptied(pl)
	w.setHeld()
}

// emptied empties pl's held list (its frames sent or freed by the caller)
// and tells its peer this worker holds nothing more for it (Peer.Holding).
func (w *worker) emptied(pl *peerLocal) {
	if len(pl.held) > 0 {
		pl.peer.holding.Add(-1)
	}
	pl.held = pl.held[:0]
	pl.sessionAsked = false
}

// heldPeer is a peer whose packets a worker holds (w.heldPeers), with
// since, the engine's clock (ns) when they began to wait for the endpoint's
// next hop's MAC alone: when the first was held, moved on while they wait
// for a session instead (flushHeld).
type heldPeer struct {
	id    int
	since int64
}

// flushHeld sends the held packets of peers that now have a keypair, and
// drops those of removed peers, of peers whose handshake gave up, and of
// peers whose next hop did not answer within neighbourWaitMax
// (expireHeld).
func (w *worker) flushHeld(now int64) {
	keep := w.heldPeers[:0]
	for i, h := range w.heldPeers {
		pl := w.localAt(h.id)
		if len(pl.held) == 0 {
			continue
		}
		if pl.peer.Removed.Load() {
			w.count(DropPeerRemoved, len(pl.held))
			w.lanRX.Free(pl.held)
			w.heldTotal -= len(pl.held)
			w.emptied(pl)
			continue
		}
		kp, ep := usable(pl.peer, now)
		if kp == nil {
			if pl.peer.FlushHeld.Load() {
				w.count(flushReason(pl.peer), len(pl.held))
				w.lanRX.Free(pl.held)
				w.heldTotal -= len(pl.held)
				w.emptied(pl)
				continue
			}
			if ep := waitsForMAC(pl.peer, now); ep != nil {
				// The MAC alone: a session that expires later asks
				// again (askSession). Held for a session that came
				// with an endpoint without a MAC (a handshake's last
				// hop taken back), they wait for it now: the control
				// plane resolves it while NeedNeighbour is raised
				// (one load while it is).
				pl.sessionAsked = false
				w.ask(pl.peer, &pl.peer.NeedNeighbour, true)
				if now-h.since > int64(neighbourWaitMax) {
					if !w.heldLater(h.id, i) {
						w.expireHeld(pl, ep, now)
					}
					continue
				}
			} else {
				h.since = now // for a session: no ARP/NDP wait yet
				w.askSession(pl, now)
			}
			keep = append(keep, h)
			continue
		}
		w.sendHeld(pl, kp, ep, now)
	}
	w.heldPeers = keep
	w.setHeld()
}

// heldLater reports whether w.heldPeers lists the peer id again after
// index i: the entry at i outlived the list it was made for (emptied by
// sendWith or dropHeld within the worker's turn, then held for again,
// which listed the peer anew with the new wait's start), and the later
// one is the peer's. Called only at an expiry, not each turn; flushHeld
// has not rewritten the entries after i yet.
func (w *worker) heldLater(id, i int) bool {
	for _, h := range w.heldPeers[i+1:] {
		if h.id == id {
			return true
		}
	}
	return false
}

// waitsForMAC returns p's endpoint when p's packets wait for its next
// hop's MAC alone (a keypair it may send with at now, an endpoint without
// a MAC: resolving, or taken back by the tick), else nil.
func waitsForMAC(p *Peer, now int64) *Endpoint {
	kp, ep := p.Current.Load(), p.Endpoint.Load()
	if kp == nil || !kp.canSend(now) || ep == nil || ep.DstMAC != ([6]byte{}) {
		return nil
	}
	return ep
}

// expireHeld drops the packets pl holds for its endpoint's next hop, whose
// MAC did not come within neighbourWaitMax (3 s): no_neighbour, or
// no_wan_route when the WAN has no route toward the endpoint (WANRoutes:
// the route went, the tick took the MAC back). Linux's wg0 sends each
// packet at once into its route's neighbour entry, which queues it while
// it resolves and drops the queue when resolution fails, after 3 probes
// a second apart (mcast_solicit, retrans_time; arp_error_report); a send
// without a route fails at once. The next packet held starts a new wait,
// as the next send starts the entry's resolution again. Those dropped
// as no_neighbour count in the peer's tx_bytes as sealed messages (the
// padded length, whitepaper §5.4.6), as wg0's socket took them before the
// neighbour layer dropped them (countSent's rule for control messages).
//
//go:noinline
func (w *worker) expireHeld(pl *peerLocal, ep *Endpoint, now int64) {
	why := DropNoNeighbour
	if !w.wanRoute(ep) {
		why = DropNoWANRoute
	}
	w.sentForTimers(pl, why == DropNoNeighbour, now)
	if why == DropNoNeighbour {
		for i := range pl.held {
			addTx(pl, w.sealedLen(pl.held[i].Len()))
		}
	}
	w.count(why, len(pl.held))
	w.lanRX.Free(pl.held)
	w.heldTotal -= len(pl.held)
	w.emptied(pl)
}

// sealedLen is the length of the transport data message that seals an
// inner packet of n bytes: its header, the packet zero-padded to a
// multiple of 16 but not past the MTU (pad), and the tag.
func (w *worker) sealedLen(n int) int {
	padded := (n + 15) &^ 15
	if padded > w.e.cfg.MTU {
		padded = max(n, w.e.cfg.MTU)
	}
	return protocol.TransportHeaderSize + padded + protocol.TagSize
}

// flushReason is why the packets held for p go when p.FlushHeld was
// seen set: the control plane gave up on the handshake (or reset the
// session), unless it removed p. A removal stores Removed before
// FlushHeld (gateway's forgetPeerLocked), so Removed loaded after
// FlushHeld was seen tells them apart; flushHeld's first look at Removed
// came before the FlushHeld it saw, and could miss a removal in between,
// which counted a removed peer's packets as handshake_gave_up.
func flushReason(p *Peer) DropReason {
	if p.Removed.Load() {
		return DropPeerRemoved
	}
	return DropHandshakeGaveUp
}

// askSession raises HandshakeNeeded for pl's held packets, once while
// they wait, when what they wait for is a session: packets held only for
// the endpoint's next hop's MAC (hold asked for no handshake: the keypair
// was usable) whose keypair expired meanwhile (Reject-After-Time,
// whitepaper §6.2), with no new packet to ask for one. Without it they
// waited, unsent, for the zeroing of the keys (§6.3, up to 540 s after the
// session began), which drops them.
// A session that came since an ask served it: the next expiry asks again.
func (w *worker) askSession(pl *peerLocal, now int64) {
	p := pl.peer
	if kp := p.Current.Load(); kp != nil && kp.canSend(now) && p.Endpoint.Load() != nil {
		pl.sessionAsked = false // the MAC only
		return
	}
	if pl.sessionAsked {
		return
	}
	pl.sessionAsked = true
	w.ask(p, &p.HandshakeNeeded, true)
}

// ask sets flag, p's HandshakeNeeded or NeedNeighbour, and lists p for the
// control plane's next tick (stamped). When wake is set, a flag that was
// clear also wakes the control plane to tick now (Engine.ControlWake);
// one already set does not, so not every packet wakes it. (A load first:
// a flag already set costs no write to its line.)
//
// hold passes wake only for the first packet it holds for the peer since
// its held list was empty: while a handshake is in flight each tick
// clears HandshakeNeeded again (gateway's Tick: a packet held restarts
// the count of attempts) and the next packet raises it, so a wake on
// every raise made a flood toward a peer that does not answer tick some
// 700 times a second instead of 20 (gateway/fastgw's
// TestFloodUnansweredTicks; the process's CPU 14-18% of a core against
// 18-20% at 20,000 packets a second) for nothing to send at once:
// the initiation left at the first packet, and its retries follow
// RekeyTimeout (whitepaper §6.4), not the packets.
func (w *worker) ask(p *Peer, flag *atomic.Bool, wake bool) {
	raised := !flag.Load() && !flag.Swap(true)
	w.e.stamped.push(p)
	if raised && wake {
		w.e.stamped.signal()
	}
}

// heldToWAN transmits out, sealed held frames of pl toward ep, and takes
// back from pl's tx_bytes those the WAN port refused (notSent).
func (w *worker) heldToWAN(pl *peerLocal, ep *Endpoint, out []dataplane.Frame) {
	sent := w.toWAN(out, true)
	for j := sent; j < len(out); j++ {
		// The refused frames are freed; their lengths are ours still.
		pl.txBytes -= int32(out[j].Len() - w.outerLen(ep))
	}
}

// sendHeld seals and transmits pl's held frames, oldest first, with kp (its
// peer's usable keypair) toward ep, and empties its held list (its ID
// leaves w.heldPeers at the next flushHeld). Counters it cannot reserve
// (Reject-After-Messages) are counted as nonce_exhausted drops. Not
// inlined: rare, and sendWith's loop stays small.
//
//go:noinline
func (w *worker) sendHeld(pl *peerLocal, kp *Keypair, ep *Endpoint, now int64) {
	held := pl.held
	first, granted := kp.ReserveNonces(len(held))
	st := w.stamp(now)
	out := w.out[:0]
	for i := range held {
		f := &held[i]
		if i >= granted {
			w.count(DropNonceExhausted, 1)
			w.lanRX.Free(held[i : i+1])
			continue
		}
		inner := f.Len()
		if !w.seal(f, pl, kp, ep, first+uint64(i)) {
			w.count(DropNoBuffer, 1)
			w.lanRX.Free(held[i : i+1])
			continue
		}
		pl.sentAt = st
		if inner > 0 {
			pl.dataSentAt = st
		}
		addTx(pl, f.Len()-w.outerLen(ep))
		w.c.encrypted.Add(1)
		w.c.encryptedBytes.Add(uint64(inner))
		out = append(out, *f)
		if len(out) == cap(out) {
			w.heldToWAN(pl, ep, out)
			out = out[:0]
		}
	}
	w.heldToWAN(pl, ep, out)
	w.markDirty(pl)
	w.heldTotal -= len(held)
	w.emptied(pl)
}

// setHeld publishes the number of frames held (for a handshake, or for a
// LAN or WAN neighbour).
func (w *worker) setHeld() {
	w.c.held.Store(uint64(w.heldTotal + len(w.nbrWait) + len(w.ctlWait)))
}
