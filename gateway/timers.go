package gateway

import (
	"sync/atomic"

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
//   - HandshakeNeeded (data waiting without a usable keypair): initiate.
//   - Promoted (the responder's Next received data and became Current):
//     the handshake is complete; the keypair pushed out is freed.
//   - Rekey (§6.2): the initiator's current session older than
//     RekeyAfterTime (120 s) when something is sent on it, or any session
//     past RekeyAfterMessages; and the initiator's "last minute" rekey when
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
func (d *Device) Tick(now int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isUnderLoad(now) // keep the 1 s hold-over current between messages
	for _, p := range d.peers {
		d.tickPeerLocked(p, now)
	}
	// Erase the keys of keypairs retired since, now that the workers
	// have had a tick to pass a batch boundary.
	d.dp.Reap()
}

func (d *Device) tickPeerLocked(p *peer, now int64) {
	fp := p.fp
	// Follow the endpoint's next hop: a MAC not known yet (the workers
	// hold packets and raise NeedNeighbour) or changed (the neighbour
	// moved, or the route did). Resolve is a lock-free lookup.
	if ep := fp.Endpoint.Load(); ep != nil && d.opts.Resolve != nil {
		if mac, ok := d.opts.Resolve(ep.Dst.Addr()); ok && mac != ep.DstMAC {
			n := *ep
			n.DstMAC = mac
			if fp.Endpoint.CompareAndSwap(ep, &n) {
				fp.NeedNeighbour.Store(false)
				d.dp.Kick()
			}
		}
	}
	if fp.Promoted.Swap(false) {
		// Key confirmation by the first data on the responder's session
		// (wireguard-go calls timersHandshakeComplete here too).
		d.completeLocked(p)
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

	// Retries and give-up.
	if p.retransmitAt != 0 && now >= p.retransmitAt {
		if p.attempts > protocol.MaxHandshakeAttempts { // wireguard-go: MaxTimerHandshakes+2 initiations in all
			d.log.Debug("handshake did not complete, giving up", "peer", p.pub, "attempts", p.attempts+1)
			p.retransmitAt = 0
			p.kaArmedAt = 0
			fp.HandshakeNeeded.Store(false)
			fp.FlushHeld.Store(true) // the workers drop the packets they hold (wireguard-go flushes its staged queue)
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
		if p.retransmitAt != 0 {
			// A handshake is in flight; its retries serve the need.
			fp.HandshakeNeeded.Store(false)
		} else {
			d.initiateLocked(p, now, false)
		}
	}

	lastSent := max(fp.Stamps.LastSent.Load(), p.ownSent)
	lastRecv := max(fp.Stamps.LastReceived.Load(), p.ownRecv)
	dataSent := fp.Stamps.LastDataSent.Load()
	dataRecv := fp.Stamps.LastDataReceived.Load()

	// Rekey.
	if kp := fp.Current.Load(); kp != nil {
		switch {
		case kp.SendCounter() >= protocol.RekeyAfterMessages:
			d.initiateLocked(p, now, false)
		case kp.IsInitiator && lastSent >= kp.Created+rekeyAfterTime:
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
		d.sendKeepaliveLocked(p, now)
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
			d.sendKeepaliveLocked(p, now)
			if p.ownSent < now {
				// Nothing could be sent (no endpoint): do not retry
				// every tick.
				p.pkaBase = now
			}
		}
	}
}
