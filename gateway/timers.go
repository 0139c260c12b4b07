package gateway

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/protocol"
)

// Derived timer constants (whitepaper §6.1, §6.2).
const (
	rekeyAfterTime     = int64(protocol.RekeyAfterTime)
	rejectAfterTime    = int64(protocol.RejectAfterTime)
	keepaliveTimeout   = int64(protocol.KeepaliveTimeout)
	rekeyTimeout       = int64(protocol.RekeyTimeout)
	newHandshakeAfter  = keepaliveTimeout + rekeyTimeout
	lastMinuteRekeyAge = rejectAfterTime - keepaliveTimeout - rekeyTimeout // 165 s: initiator rekeys on receive
	second             = int64(1e9)
)

// Tick evaluates every peer's timers at now (ns of Options.Now) from the
// stamps and flags the workers published, and sends what falls due through
// the dataplane. Start calls it every TickInterval; tests call it with a
// fake clock. The rules are those of whitepaper §6 as wireguard-go's
// device/timers.go and send.go apply them:
//
//   - HandshakeNeeded (data waiting without a usable keypair): initiate,
//     at most once per RekeyTimeout after our last initiation or response
//     (§6.1); nothing if Current became usable meanwhile (the responder's
//     Next promoted: the workers send what they held with it), also while
//     the endpoint's next hop has no MAC yet (NeedNeighbour: the ticks
//     resolve it, backing off to once a second, followNeighbourLocked, and
//     the workers send once it is known).
//   - Promoted (the responder's Next received data and became Current):
//     the handshake is complete; the keypair pushed out is freed.
//   - Rekey (§6.2): the initiator's current session older than
//     RekeyAfterTime (120 s) when data or a keepalive is sent on it, or any
//     session past RekeyAfterMessages, once per new sending; and the initiator's "last minute" rekey when
//     any authenticated packet (keepalives too) arrives on a session older than RejectAfterTime − KeepaliveTimeout
//     − RekeyTimeout (165 s).
//   - Reject (§6.1): a keypair older than RejectAfterTime (180 s) is taken
//     out of its slot, unpublished and retired (dead at once, the workers
//     already refuse it; its keys erased after the grace period).
//   - Retry (§6.4): an initiation unanswered for RekeyTimeout plus jitter is
//     resent; after the first initiation and MaxHandshakeAttempts+1 retries
//     (20 initiations, as wireguard-go sends) give up: no more retries until
//     new data asks, HandshakeNeeded is cleared, the exchange is abandoned
//     and zeroing is armed; FlushHeld makes the workers drop (and count)
//     the packets they hold for the peer, as wireguard-go flushes its
//     staged queue.
//   - Keepalive (§6.5): KeepaliveTimeout (10 s) after data was received
//     with nothing sent since, send an empty transport message.
//   - New handshake (§6.5): KeepaliveTimeout + RekeyTimeout (15 s, plus
//     jitter) after data was sent with nothing received since, initiate.
//   - Persistent keepalive (§6.5): an empty message after the configured
//     interval without any authenticated packet sent or received.
//   - Zeroing (§6.3): RejectAfterTime × 3 (540 s) after the last session
//     was derived, every keypair is retired (keys erased after the grace
//     period) and the handshake state zeroed.
//
// Tick does not walk every peer. It evaluates the peers the dataplane
// reports stamped since the last tick (StampedPeers), the peers the
// handshake workers or the UAPI touched, and the peers whose earliest
// deadline in the timer heap has come; after evaluating a peer it files it
// again under its next deadline (nextDueLocked). Between two evaluations a
// peer's rules can only change by time passing its deadlines (or by new
// stamps, which bring it back), so this is the same as evaluating every peer
// every tick, with O((due + stamped) · log n) work. A dataplane without
// StampedPeers gets the walk of every peer. A peer whose lock a handshake
// worker holds (Curve25519 work) is left for the next tick rather than
// waited for. Safe for concurrent use (one Tick at a time).
func (d *Device) Tick(now int64) {
	d.zeroRetired()
	d.idMu.RLock()
	defer d.idMu.RUnlock()
	d.tickMu.Lock()
	defer d.tickMu.Unlock()
	began := time.Now()
	defer func() { d.tickBusy += time.Since(began) }()
	d.isUnderLoad(now) // keep the 1 s hold-over current between messages
	d.tickGen++
	gen := d.tickGen
	due := d.due[:0]
	// Read before the peers' evaluations: a change after it, which an
	// evaluation may have missed, makes the next tick sweep.
	changes := d.resolveChanges()

	// The peers the workers stamped (or all of them, for a dataplane that
	// cannot say which).
	if sp, ok := d.dp.(stampReporter); ok {
		d.stamped = sp.StampedPeers(d.stamped[:0])
		if len(d.stamped) > 0 {
			d.mu.RLock()
			for _, fp := range d.stamped {
				if p := d.byFP[fp]; p != nil {
					due = append(due, p)
				}
			}
			d.mu.RUnlock()
		}
		clear(d.stamped)
	} else {
		d.mu.RLock()
		due = d.peers.Append(due)
		d.mu.RUnlock()
	}
	// The peers the handshake workers and the UAPI touched.
	d.touchMu.Lock()
	touched := d.touched
	d.touched = nil
	d.touchMu.Unlock()
	for _, p := range touched {
		p.touched.Store(false)
	}
	due = append(due, touched...)
	// The peers whose deadline came.
	due = d.timers.popDue(now, due)

	for _, p := range due {
		if p.evalGen == gen {
			continue // listed twice
		}
		if !p.mu.TryLock() {
			// A handshake worker is in this peer's exchange: look again
			// next tick rather than wait behind its Curve25519 work.
			d.timers.set(p, now)
			continue
		}
		p.evalGen = gen
		if p.removed {
			p.mu.Unlock()
			d.timers.remove(p)
			continue
		}
		d.tickPeerLocked(p, now)
		d.tickEvals++
		next := d.nextDueLocked(p, now)
		p.mu.Unlock()
		d.timers.set(p, next)
	}
	clear(due)
	d.due = due[:0]
	if cap(d.due) > 4096 && len(touched) < 1024 {
		d.due = nil // after a storm: give the scratch back
	}
	d.sweepNextHops(now, gen, changes)
	// Erase the keys of keypairs retired since, now that the workers
	// have had a tick to pass a batch boundary.
	d.dp.Reap()
}

// TickStats describes the timers' work: Ticks run, peer evaluations done
// in them, and the peers waiting in the timer heap now.
type TickStats struct {
	Ticks, Evaluated uint64
	Scheduled        int
	// Busy is the wall time spent in Tick (its locks held), an upper
	// bound of its CPU time.
	Busy time.Duration
}

// TickStats returns the timers' counters (see TickStats). It waits for a
// Tick in progress.
func (d *Device) TickStats() TickStats {
	d.tickMu.Lock()
	defer d.tickMu.Unlock()
	return TickStats{Ticks: d.tickGen, Evaluated: d.tickEvals, Scheduled: len(d.timers), Busy: d.tickBusy}
}

// nextDeadline returns the earliest deadline in the timer heap.
func (d *Device) nextDeadline() (int64, bool) {
	d.tickMu.Lock()
	defer d.tickMu.Unlock()
	if len(d.timers) == 0 {
		return 0, false
	}
	return d.timers[0].due, true
}

// stampReporter is the optional side of a Dataplane that says which peers
// its workers stamped (fastpath.Engine.StampedPeers).
type stampReporter interface {
	StampedPeers(dst []*fastpath.Peer) []*fastpath.Peer
}

// nextDueLocked is the earliest time at which one of p's rules can fire
// with no new stamp (Tick evaluates p again then), or 0 for none: each
// time-driven rule of tickPeerLocked gives its deadline. The rules driven
// by stamps and flags (HandshakeNeeded, Promoted, rekey on sending or on
// receiving, the arming of the keepalive and new-handshake timers) bring
// the peer back through StampedPeers. p.mu held.
func (d *Device) nextDueLocked(p *peer, now int64) int64 {
	var next int64
	at := func(t int64) {
		if t < now {
			t = now // the next tick
		}
		if next == 0 || t < next {
			next = t
		}
	}
	fp := p.fp
	for _, slot := range []*atomic.Pointer[fastpath.Keypair]{&fp.Current, &fp.Previous, &fp.Next} {
		if kp := slot.Load(); kp != nil {
			at(kp.Created + rejectAfterTime)
		}
	}
	for _, o := range p.owned {
		if o.missing {
			at(now) // the second sweep, next tick
			break
		}
	}
	if p.zeroAt != 0 {
		at(p.zeroAt)
	}
	if p.retransmitAt != 0 && !p.initQueued {
		at(p.retransmitAt) // a queued initiation re-arms it when it leaves (runInitiation)
	}
	if fp.HandshakeNeeded.Load() && p.hs != nil {
		// initiateLocked held back by the RekeyTimeout limit.
		at(p.lastInitSent + rekeyTimeout)
	}
	if needNeighbour(fp) && d.opts.Resolve != nil && fp.Endpoint.Load() != nil {
		at(p.nbrRetryAt) // resolve again then (tickPeerLocked's backoff)
	}
	if p.kaArmedAt != 0 {
		at(p.kaArmedAt + keepaliveTimeout)
	}
	if p.nhArmedAt != 0 {
		at(p.nhArmedAt + newHandshakeAfter + p.nhJitter)
	}
	if p.keepalive != 0 {
		last := max(fp.Stamps.LastSent.Load(), p.ownSent, fp.Stamps.LastReceived.Load(), p.ownRecv, p.pkaBase)
		at(last + int64(p.keepalive)*second)
	}
	return next
}

// maxNeighbourBackoff bounds the wait between two resolutions of a peer's
// endpoint whose next hop has no MAC: Linux's neighbour code asks again
// once per RETRANS_TIME (1 s by default, RFC 4861 §10 RETRANS_TIMER; arp
// Config.RetransTimer), so that a MAC found is used within it.
const maxNeighbourBackoff = int64(time.Second)

// minNeighbourBackoff is the first wait before a peer's endpoint whose
// next hop has no MAC is resolved again (then doubled each time): an ARP
// or NDP answer takes a round trip on the WAN, some milliseconds, and
// the packets held for it (as Linux queues them on a neighbour entry
// being resolved) leave at the first resolution after it. It was one
// tick (50 ms): the packets waited that long after the answer came, where
// an entry the kernel had flushed (ip neigh flush, an owned-mode entry
// aged out while the peer was idle) was answered in a few milliseconds.
const minNeighbourBackoff = int64(5 * time.Millisecond)

// followNeighbourLocked follows p's endpoint's next hop: a MAC not known
// yet (the workers hold packets and raise NeedNeighbour) or changed (the
// neighbour moved, or the route did). Resolve is a lock-free lookup (with
// a request for a missing neighbour). While NeedNeighbour stays set and
// the MAC is not found, it resolves again minNeighbourBackoff later, then
// twice that, four times ... at most maxNeighbourBackoff apart
// (nbrRetryAt, which nextDueLocked files the peer under), not at every
// tick: 10,000 such peers cost a tick some 1.5 ms of resolutions every
// 50 ms (BenchmarkTickNeedNeighbour). A
// flag raised while the endpoint already has its MAC (a worker read the
// endpoint before the tick stored it) is cleared. idle: p is looked at
// only because the resolver's answers changed (sweepNextHops), nothing
// sent to it for all we know. p.mu held.
func (d *Device) followNeighbourLocked(p *peer, now int64, idle bool) {
	fp := p.fp
	ep := fp.Endpoint.Load()
	if ep == nil || d.opts.Resolve == nil {
		return
	}
	need := needNeighbour(fp)
	var changes uint64 // read before Resolve: a change after it ends the next backoff
	if need && d.opts.ResolveChanges != nil {
		changes = d.opts.ResolveChanges() // only the backoff uses it
	}
	if need && ep == p.nbrEP && now < p.nbrRetryAt && changes == p.nbrChanges {
		// Backing off; a new endpoint is resolved at once, and so is
		// one whose route or neighbour changed since (the route moved
		// back to a next hop the kernel knows, or the ARP/NDP answer
		// came): up to maxNeighbourBackoff later, the packets held for
		// it waited that long, where Linux sends them at the answer.
		return
	}
	resolve := d.opts.Resolve
	if !need && (idle || ep.DstMAC == ([6]byte{})) {
		// Nothing waits for this next hop (a configured peer not
		// sent to yet, one whose held packets expired, an idle
		// peer swept after a route or neighbour change): look,
		// without asking the network or marking the neighbour used,
		// as Linux asks only when it sends. A MAC the resolver gave
		// and has no longer is taken back below, and the next
		// packet, held, asks. Before, every such peer's evaluation
		// sent ARP/NDP requests (each idle peer's after a neighbour
		// flush), and once a second for good after its packets had
		// waited 3 s for a next hop that never answered. A peer the
		// tick evaluates with a MAC is sending or due to: Resolve's
		// lookup marks its neighbour used, so that the table keeps
		// it fresh (owned mode deleted an unused one a minute after
		// it went stale, and the peer's packets waited for an ARP
		// round trip every 90 s; a kernel entry is reconfirmed only
		// when used).
		resolve = d.known()
	}
	mac, ok := resolve(ep.Dst.Addr())
	if ok {
		p.routedMAC, p.routedDst, p.routeGone = mac, ep.Dst.Addr().Unmap(), false
	}
	switch {
	case ok && mac != ep.DstMAC:
		n := *ep
		n.DstMAC = mac
		if fp.Endpoint.CompareAndSwap(ep, &n) {
			fp.NeedNeighbour.Store(false)
			d.dp.Kick()
		}
	case ok:
		if need {
			fp.NeedNeighbour.Store(false)
			d.dp.Kick() // the workers send what they held
		}
	case ep.DstMAC != ([6]byte{}) && d.opts.Routed != nil && (ep.DstMAC == p.routedMAC && ep.Dst.Addr().Unmap() == p.routedDst || p.routeGone && !d.opts.Routed(ep.Dst.Addr())):
		// The resolver has no MAC for the endpoint now. Either the
		// route the endpoint's MAC came from went (deleted, a
		// blackhole, unreachable, out of another interface), or it
		// leads to another next hop (`ip route replace ... via`)
		// whose MAC is not known yet, or its next hop's neighbour
		// entry failed: Linux sends nothing more to the old next hop
		// then (its route lookup on every send finds no route, or a
		// neighbour entry that queues the packets until it resolves,
		// or drops them), and neither do the workers. They hold what
		// they have for the peer (no MAC: not sendable) and raise
		// NeedNeighbour; the ticks resolve it again, backing off,
		// until a route leads out of the WAN and its next hop
		// answers. Before, a next hop that never answered left the
		// old one sent to for as long as the session lasted. Once the
		// route went (routeGone), a MAC that no route gave (the last
		// hop of a handshake or a roam from the peer) is taken back
		// too while no route leads out of the WAN, as wg0 sends
		// nothing to such an endpoint whatever it receives from it;
		// one kept before the route ever went (the route leading
		// elsewhere all along: the kernel's ip rules may route it by
		// another table) stays.
		n := *ep
		n.DstMAC = [6]byte{}
		if fp.Endpoint.CompareAndSwap(ep, &n) {
			gone := !d.opts.Routed(ep.Dst.Addr())
			if gone && !p.routeGone {
				d.log.Debug("peer's endpoint lost its route out of the WAN: nothing is sent to it until one comes back", "peer", p.pub, "endpoint", ep.Dst)
			} else if !gone {
				d.log.Debug("peer's endpoint's next hop has no MAC now (its route moved, or the neighbour failed): nothing is sent to the old one", "peer", p.pub, "endpoint", ep.Dst)
			}
			// routedMAC stays: the old next hop's MAC coming back
			// as the last hop of the peer's handshake is not
			// used while the resolver gives none (dstMACFor,
			// lastHopTakenBack), nor as that of a roam of the
			// workers' to another port of the address (taken
			// again at the next tick), as Linux sends only to the
			// route's next hop. Forgotten, the peer's next
			// handshake put the session back through the old
			// router for as long as it lasted.
			p.routeGone = p.routeGone || gone
		}
	case need:
		if ep != p.nbrEP {
			p.nbrEP, p.nbrBackoff = ep, 0
		}
		p.nbrBackoff = min(max(2*p.nbrBackoff, minNeighbourBackoff), maxNeighbourBackoff)
		p.nbrRetryAt, p.nbrChanges = now+p.nbrBackoff, changes
		return
	}
	p.nbrEP, p.nbrRetryAt, p.nbrBackoff = nil, 0, 0
}

// needNeighbour reports whether packets wait for p's endpoint's next
// hop's MAC: a worker raised NeedNeighbour and some worker holds packets
// for p (a flag left raised after they went, sent or dropped after their
// 3 s, asks for nothing: the next packet held makes the worker list p
// again, fastpath's hold).
func needNeighbour(p *fastpath.Peer) bool {
	return p.NeedNeighbour.Load() && p.Holding()
}

// known is Options.Known, or Resolve without one.
func (d *Device) known() func(netip.Addr) ([6]byte, bool) {
	if d.opts.Known != nil {
		return d.opts.Known
	}
	return d.opts.Resolve
}

// tickPeerLocked applies every rule of Tick to p at now. p.mu held.
func (d *Device) tickPeerLocked(p *peer, now int64) {
	fp := p.fp
	d.followNeighbourLocked(p, now, false)
	if fp.Promoted.Swap(false) {
		// Key confirmation by the first data on the responder's session
		// (wireguard-go calls timersHandshakeComplete here too), and the
		// keepalive that waited for a session goes with it (wireguard-go
		// sends its staged packets then).
		staged := p.kaStaged
		d.completeLocked(p)
		if staged {
			d.keepaliveLocked(p, now)
		}
	}

	// Reject after RejectAfterTime: unpublish.
	var rejected [3]*fastpath.Keypair
	for i, slot := range []*atomic.Pointer[fastpath.Keypair]{&fp.Current, &fp.Previous, &fp.Next} {
		if kp := slot.Load(); kp != nil && now-kp.Created >= rejectAfterTime && slot.CompareAndSwap(kp, nil) {
			rejected[i] = kp
		}
	}
	d.sweepLocked(p, rejected[:]...)

	// Zeroing of all key material.
	if p.zeroAt != 0 && now >= p.zeroAt {
		d.log.Debug("zeroing key material", "peer", p.pub)
		d.resetSessionLocked(p)
		p.initSent = false
		return
	}

	// Retries and give-up, counted from when the last initiation left:
	// none while it still waits in the handshake pool's queue.
	if p.retransmitAt != 0 && now >= p.retransmitAt && !p.initQueued {
		if p.attempts > protocol.MaxHandshakeAttempts { // wireguard-go: MaxTimerHandshakes+2 initiations in all
			d.log.Debug("handshake did not complete, giving up", "peer", p.pub, "attempts", p.attempts+1)
			p.retransmitAt = 0
			p.kaArmedAt = 0
			fp.HandshakeNeeded.Store(false)
			fp.FlushHeld.Store(true) // the workers drop the packets they hold (wireguard-go flushes its staged queue)
			p.kaStaged = false
			d.dropPendingLocked(p)
			if p.hs != nil {
				p.hs.Clear()
			}
			d.armZeroIfIdleLocked(p, now)
		} else {
			p.attempts++
			// Let a retry through the RekeyTimeout limit: its own deadline
			// already is RekeyTimeout plus jitter after the last one.
			p.initSent = false
			d.initiateLocked(p, now, true)
		}
	}

	if fp.HandshakeNeeded.Load() {
		if canSendOn(fp.Current.Load(), now) && fp.Endpoint.Load() != nil {
			// A session became usable since a worker asked (the
			// responder's Next, promoted by the initiator's first
			// message): the workers send what they hold with it, as
			// wireguard-go sends its staged packets, and no handshake is
			// needed (§6.1: none is sent without need). So too when
			// they hold them only for the endpoint's next hop, whose
			// MAC NeedNeighbour's resolution above brings (a handshake
			// would wait for the same MAC: its initiation cannot leave
			// before it, fastpath's waitControl).
			fp.HandshakeNeeded.Store(false)
		} else if p.retransmitAt != 0 {
			// A handshake is in flight; its retries serve the need.
			// A packet held for it starts the attempts' count again,
			// as wireguard-go's SendHandshakeInitiation(false) and
			// the kernel's wg_packet_send_queued_handshake_initiation
			// do for every packet queued without a usable keypair:
			// while data keeps coming the retries go on, and the
			// newest packets held are sent once the peer answers,
			// where a give-up 90 s after the first initiation dropped
			// them (a helper's outage of two minutes: 37 of 130 pings
			// delivered, 130 by wireguard-go).
			fp.HandshakeNeeded.Store(false)
			p.attempts = 0
		} else {
			d.initiateLocked(p, now, false)
		}
	}

	lastSent := max(fp.Stamps.LastSent.Load(), p.ownSent)
	lastRecv := max(fp.Stamps.LastReceived.Load(), p.ownRecv)
	dataSent := fp.Stamps.LastDataSent.Load()
	dataRecv := fp.Stamps.LastDataReceived.Load()

	// Rekey. The rules on sending look at data the workers sent since the
	// last look (keepalives check for themselves, keepaliveLocked), once:
	// wireguard-go's keepKeyFreshSending runs per transport message sent,
	// and each of its initiations that the RekeyTimeout limit holds back
	// restarts the count of attempts, so acting again on the same old
	// stamp at every evaluation would restart it for as long as the
	// session lasts and a rekey that gets no answer would never give up
	// (§6.4).
	if kp := fp.Current.Load(); kp != nil {
		sentSince := dataSent > p.freshSent
		p.freshSent = max(p.freshSent, dataSent)
		switch {
		case sentSince && kp.SendCounter() >= protocol.RekeyAfterMessages:
			d.initiateLocked(p, now, false)
		case sentSince && kp.IsInitiator && dataSent >= kp.Created+rekeyAfterTime:
			d.initiateLocked(p, now, false)
		case kp.IsInitiator && !p.sentLastMin && fp.Stamps.LastReceived.Load() >= kp.Created+lastMinuteRekeyAge:
			// Any authenticated transport packet, keepalives included
			// (whitepaper §6.2; wireguard-go keepKeyFreshReceiving).
			p.sentLastMin = true
			d.initiateLocked(p, now, false)
		}
	}

	// Keepalive after receiving data without sending.
	// Ties (data received in the same ns as something sent) arm the timer:
	// the stamps cannot tell the order, and an extra keepalive is harmless
	// where a missing one lets the peer's new-handshake timer fire.
	if p.kaArmedAt != 0 && lastSent > p.kaArmedAt {
		p.kaArmedAt = 0
	}
	if p.kaArmedAt == 0 && dataRecv != 0 && dataRecv >= lastSent {
		p.kaArmedAt = dataRecv
	}
	if p.kaArmedAt != 0 && now-p.kaArmedAt >= keepaliveTimeout {
		p.kaArmedAt = 0
		d.keepaliveLocked(p, now)
		lastSent = max(lastSent, p.ownSent)
	}

	// New handshake after sending data without receiving.
	if p.nhArmedAt != 0 && lastRecv >= p.nhArmedAt {
		p.nhArmedAt = 0
	}
	if p.nhArmedAt == 0 && dataSent != 0 && dataSent > lastRecv && dataSent > p.nhRearm {
		p.nhArmedAt = dataSent
		p.nhJitter = int64(d.opts.Jitter())
	}
	if p.nhArmedAt != 0 && now-p.nhArmedAt >= newHandshakeAfter+p.nhJitter {
		d.log.Debug("no reply to data, new handshake", "peer", p.pub)
		p.nhArmedAt = 0
		p.nhRearm = now
		d.initiateLocked(p, now, false)
		lastSent = max(lastSent, p.ownSent)
	}

	// Persistent keepalive.
	if p.keepalive != 0 {
		last := max(lastSent, lastRecv, p.pkaBase)
		if now-last >= int64(p.keepalive)*second {
			d.keepaliveLocked(p, now)
			if p.ownSent < now {
				// Nothing could be sent (no endpoint): do not retry
				// every tick.
				p.pkaBase = now
			}
		}
	}
}

// canSendOn reports whether kp, a peer's Current keypair, can carry data at
// now: confirmed, alive, younger than RejectAfterTime and short of
// RejectAfterMessages (whitepaper §5.4.6, §6.2), what the workers' sendable
// asks of it.
func canSendOn(kp *fastpath.Keypair, now int64) bool {
	return kp != nil && kp.Confirmed() && !kp.Dead() && now-kp.Created < rejectAfterTime &&
		kp.SendCounter() < protocol.RejectAfterMessages
}
