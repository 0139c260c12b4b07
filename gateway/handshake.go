package gateway

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

func randomJitter() time.Duration {
	return time.Duration(rand.Int64N(int64(protocol.RekeyTimeoutJitterMax)))
}

// isUnderLoad applies the rule of wireguard-go and the kernel (whitepaper
// §5.3): under load while the handshake pool's queue of received messages
// is at least 1/8 full (or the dataplane's channel before it,
// Dataplane.UnderLoad) and for noise.UnderLoadAfterTime (1 s) after. Safe
// for concurrent use.
func (d *Device) isUnderLoad(now int64) bool {
	if d.pool.loaded() || d.dp.UnderLoad() {
		if now > d.underLoad.Load() {
			d.underLoad.Store(now)
		}
		d.wasLoaded.Store(true)
		return true
	}
	return d.wasLoaded.Load() && now-d.underLoad.Load() < int64(noise.UnderLoadAfterTime)
}

// identity returns the current static identity (nil: no private key). The
// caller holds idMu for reading while it uses it.
func (d *Device) identity() *noise.StaticIdentity {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.id
}

// HandleMessage processes one received handshake message (initiation,
// response or cookie reply; whitepaper §5.4). MAC1 is checked first, before
// any Curve25519 work; under load (Dataplane.UnderLoad now or within the
// last second) an initiation or response without a valid MAC2 gets a cookie
// reply instead (at most CookieRepliesPerSecond over all sources: the
// sources are unproven, so no per-source state is kept for them), and one
// with a valid MAC2, its source address proven, is rate-limited per source
// by noise.SourceLimiter (20/s, burst 5, bounded table), where the kernel's
// cookie.c and wireguard-go's RoutineHandshake apply their limiter; package
// noise refuses a replayed timestamp and an initiation within 20 ms of the
// peer's last accepted one (§5.4.2). An accepted initiation is answered from
// the queue it arrived on, to its outer source, which becomes the peer's
// endpoint (§2.1). Bad messages are dropped and counted (Stats), never
// returned as errors.
//
// Safe for concurrent use: the handshake pool's workers call it in
// parallel (tests may call it directly). The Curve25519 work runs under no
// lock shared between peers: the identity's DH of an initiation under none
// at all, the rest under the sending peer's own lock, which also makes
// "consume the initiation, create the response, install the session" one
// step per peer, so that concurrent initiations from one peer give at most
// one session each and the timestamp rule holds. m.Data is only read.
func (d *Device) HandleMessage(m fastpath.HandshakeMessage) { d.handle(m, true) }

// handleQueued is HandleMessage for a message admission queued (admit):
// the per-source limit was applied there, if under load then, and is not
// charged twice.
func (d *Device) handleQueued(m fastpath.HandshakeMessage) { d.handle(m, false) }

// handle is HandleMessage; limit applies the per-source limit under load.
func (d *Device) handle(m fastpath.HandshakeMessage, limit bool) {
	d.idMu.RLock()
	defer d.idMu.RUnlock()
	now := d.now()
	id, underLoad, ok := d.screen(m, now)
	if !ok {
		return
	}
	msg := m.Data
	switch msg[0] {
	case noise.TypeInitiation, noise.TypeResponse:
		// The limiter applies after a valid MAC2 only: the source is
		// proven, so its state cannot be grown by spoofed sources.
		if limit && underLoad && !d.limiter.Allow(m.Src.Addr()) {
			d.stats.drop(DropRateLimited)
			return
		}
		if msg[0] == noise.TypeInitiation {
			d.consumeInitiation(id, m, now)
		} else {
			d.consumeResponse(m, now)
		}
	default:
		d.consumeOther(m)
	}
}

// consumeOther settles a received message that is neither an initiation
// nor a response, none of which costs Curve25519 work: a cookie reply
// (whitepaper §5.4.7) is given to the peer whose initiation in flight,
// or keypair, its receiver index names, which keeps the cookie if the
// reply decrypts with the MAC1 we last sent it; anything else is dropped.
// Admission calls it, so that these never take a place in the pool's
// queue. idMu held for reading.
func (d *Device) consumeOther(m fastpath.HandshakeMessage) {
	msg := m.Data
	if msg[0] != noise.TypeCookieReply {
		d.stats.drop(DropUnknownType)
		return
	}
	recv, ok := noise.MessageReceiver(msg)
	if !ok {
		// Its reason in Stats.Noise, as package noise gives those it
		// refuses: without, handshake_invalid held more than its
		// reasons added up to.
		// (Reserved bytes set are refused before: unknown_type.)
		d.stats.drop(DropHandshakeInvalid)
		if id := d.identity(); id != nil {
			id.Stats().Refused(noise.DropWrongSize)
		}
		return
	}
	// p.hs is read under mu, not p.mu (it is written under both, and is
	// nil once p is removed): admission never waits for a peer's lock,
	// which a handshake worker holds through its Curve25519 work.
	p := d.pendingPeer(recv)
	var hs *noise.Handshake
	d.mu.RLock()
	if p == nil {
		if kp := d.dp.Indexes().Lookup(recv); kp != nil {
			p = d.byFP[kp.Peer]
		}
	}
	if p != nil {
		hs = p.hs
	}
	d.mu.RUnlock()
	if hs == nil {
		d.stats.drop(DropUnknownIndex)
		return
	}
	// The cookie generator has its own lock.
	if err := hs.ConsumeCookieReply(msg); err != nil {
		d.stats.drop(DropHandshakeInvalid)
		return
	}
	d.log.Debug("cookie reply consumed", "peer", p.pub)
}

// screen does the checks of a received handshake message that cost no
// Curve25519 work (whitepaper §5.4.4, §5.4.7) and returns the identity to
// go on with and whether the device is under load (then an initiation or
// response has a valid MAC2), or ok = false when the message was dropped
// (counted) or answered with a cookie reply: the first four bytes, a
// private key, and for an initiation or response MAC1 and, under load,
// MAC2. idMu held for reading.
func (d *Device) screen(m fastpath.HandshakeMessage, now int64) (id *noise.StaticIdentity, underLoad, ok bool) {
	msg := m.Data
	if len(msg) < 4 || msg[1] != 0 || msg[2] != 0 || msg[3] != 0 {
		d.stats.drop(DropUnknownType)
		return nil, false, false
	}
	if id = d.identity(); id == nil {
		d.stats.drop(DropNoPrivateKey)
		return nil, false, false
	}
	if msg[0] != noise.TypeInitiation && msg[0] != noise.TypeResponse {
		return id, false, true
	}
	underLoad = d.isUnderLoad(now)
	v, err := id.CookieChecker().Check(msg, m.Src, underLoad)
	switch v {
	case noise.VerdictDrop:
		d.stats.drop(DropHandshakeInvalid)
		if errors.Is(err, noise.DropBadMAC1) {
			d.warnBadMAC1(m.Src, now)
		}
		return nil, false, false
	case noise.VerdictCookie:
		d.cookieReply(id, m, now)
		return nil, false, false
	}
	return id, underLoad, true
}

// cookieReply answers m, an initiation or response without a valid MAC2
// under load, with a cookie reply (whitepaper §5.4.7), within the global
// budget of cookie replies. idMu held for reading.
func (d *Device) cookieReply(id *noise.StaticIdentity, m fastpath.HandshakeMessage, now int64) {
	if !d.replies.allow(now) {
		d.stats.drop(DropCookieBudget)
		return
	}
	var reply [noise.CookieReplySize]byte
	if err := id.CookieChecker().CreateReply(&reply, m.Data, m.Src); err != nil {
		d.stats.drop(DropHandshakeInvalid)
		return
	}
	if d.sendWait(m.Queue, fastpath.ControlPacket{Dst: m.Src, Src: m.Dst.Addr(), SrcPort: m.Dst.Port(), DstMAC: d.cookieReplyMAC(m), Payload: reply[:]}) {
		d.stats.cookieRepliesSent.Add(1)
	}
}

// pendingPeer returns the peer whose initiation in flight has receiver
// index recv, or nil.
func (d *Device) pendingPeer(recv uint32) *peer {
	d.pendMu.Lock()
	defer d.pendMu.Unlock()
	return d.pending[recv]
}

// consumeInitiation answers an initiation (whitepaper §5.4.2, §5.4.3). The
// identity's DH (ephemeral × our static) runs before the peer is known,
// under no lock; the peer's lock is taken in the lookup and held through
// the response and the session's installation, and released before the
// response is posted: a full mailbox is waited on (sendWait) rather than
// throwing away four Curve25519 operations, and nobody waits on the peer
// meanwhile.
func (d *Device) consumeInitiation(id *noise.StaticIdentity, m fastpath.HandshakeMessage, now int64) {
	var resp [noise.ResponseSize]byte
	p, mac, moved, ok := d.respond(id, m, now, &resp)
	if p != nil {
		p.mu.Unlock()
		d.touch(p)
	}
	if !ok {
		return
	}
	if d.sendWait(m.Queue, fastpath.ControlPacket{Dst: m.Src, Src: m.Dst.Addr(), SrcPort: m.Dst.Port(), DstMAC: mac, Payload: resp[:], Peer: p.fp}) {
		d.stats.responsesSent.Add(1)
		d.log.Debug("handshake response sent", "peer", p.pub, "endpoint", m.Src)
	}
	// The responder's keypair is not usable before the initiator's first
	// data promotes it (in the worker, which then sends what it held), so
	// only a new endpoint, for a session already current, can free held
	// packets: wake every worker for that alone (the response's own
	// worker is woken by its post).
	if moved {
		d.dp.Kick()
	}
}

// respond consumes the initiation m, writes the response into resp and
// installs the session. It returns the sending peer, locked (nil if none
// was found), the next hop's MAC to send resp to (dstMACFor, decided under
// the peer's lock), whether the peer's endpoint moved, and whether resp is
// to be sent.
func (d *Device) respond(id *noise.StaticIdentity, m fastpath.HandshakeMessage, now int64, resp *[noise.ResponseSize]byte) (p *peer, mac [6]byte, moved, ok bool) {
	// p is locked once the lookup found it.
	var unknown noise.PublicKey // the initiator's static key, when no peer has it
	hs, err := id.ConsumeInitiation(m.Data, func(k noise.PublicKey) *noise.Handshake {
		d.mu.RLock()
		q := d.byKey[k]
		d.mu.RUnlock()
		if q == nil {
			unknown = k
			return nil
		}
		q.mu.Lock()
		if q.removed || q.hs == nil {
			q.mu.Unlock()
			unknown = k
			return nil
		}
		p = q
		return q.hs
	})
	if err != nil {
		if errors.Is(err, noise.DropUnknownPeer) {
			d.stats.drop(DropUnknownPeer)
			if !unknown.IsZero() {
				d.warnUnknownPeer(unknown, m.Src, now)
			}
		} else {
			d.stats.drop(DropHandshakeInvalid)
		}
		return p, mac, false, false
	}
	if p == nil || p.hs != hs {
		d.stats.drop(DropUnknownPeer)
		return p, mac, false, false
	}
	// An authenticated handshake message counts in the peer's rx_bytes,
	// as the one we send counts in its tx_bytes (wireguard-go's
	// RoutineHandshake, the kernel's wg_receive_handshake_packet).
	p.fp.RxBytes.Add(uint64(len(m.Data)))
	// The responder's exchange replaces our own initiation in flight, if
	// any (simultaneous initiations: both sides answer, the later session
	// wins, as in wireguard-go). What that initiation was for still needs
	// a session: abandoned, it raises the need again (below).
	abandoned := p.hasPending || p.initQueued || p.retransmitAt != 0
	d.dropPendingLocked(p)
	p.initQueued = false
	idx, err := d.dp.Indexes().Allocate()
	if err != nil {
		p.hs.Clear()
		d.stats.drop(DropIndexTableFull)
		return p, mac, false, false
	}
	if err := p.hs.CreateResponse(resp, idx); err != nil {
		d.dp.Indexes().Free(idx)
		d.stats.drop(DropHandshakeInvalid)
		return p, mac, false, false
	}
	if !d.installLocked(p, idx, now) {
		return p, mac, false, false
	}
	mac = d.dstMACFor(m, p)
	moved = d.setEndpointFromLocked(p, m, mac)
	p.ownRecv = max(p.ownRecv, now)
	d.armZeroLocked(p, now)
	d.sentLocked(p, now)
	d.responseSentLocked(p, now)
	if abandoned {
		// Our initiation's retry stops with the response (§6.1), and the
		// workers that asked for it hold their packets without asking
		// again: raise the need ourselves, so that if the initiator's
		// first message does not come to promote the session we
		// answered (its side refused our answer, having abandoned its
		// initiation for ours: crossed initiations), we initiate once
		// RekeyTimeout plus jitter has passed since the response
		// (responseSentLocked); a session usable by then clears it
		// (tickPeerLocked). wireguard-go and the kernel initiate again
		// at the next packet to send; our workers ask once for the
		// packets they hold.
		p.fp.HandshakeNeeded.Store(true)
	}
	return p, mac, moved, true
}

// responseSentLocked applies the rule that a handshake message, response as
// well as initiation, is sent at most once per RekeyTimeout (whitepaper §6.1,
// "under no circumstances" more often; wireguard-go's SendHandshakeResponse
// and the kernel's wg_packet_send_handshake_response record the response as
// the last handshake sent). So a responder with data waiting does not cross
// the initiator's exchange with one of its own: the data goes once the
// initiator's first message promotes the responder's keypair (§5.4.6), and
// only if none came within RekeyTimeout does the responder initiate. Our
// own initiation in flight was abandoned by consuming the peer's
// (dropPendingLocked): its retry stops, as wireguard-go's retry, falling
// within RekeyTimeout of the response, is not sent and not re-armed.
//
// Our next initiation waits RekeyTimeout plus jitter after the response
// (the limit is recorded that much later), where wireguard-go's and the
// kernel's wait RekeyTimeout exactly: two sides whose initiations crossed
// (each consumed the other's, answered it and refused the answer to its
// own) otherwise initiate again in step, RekeyTimeout after their
// answers, and cross again every 5 s for as long as both have data to
// send; the jitter (§6.4's, up to 333 ms) puts them apart. p.mu held.
func (d *Device) responseSentLocked(p *peer, now int64) {
	p.lastInitSent, p.initSent = now+int64(d.opts.Jitter()), true
	p.retransmitAt = 0
}

// consumeResponse completes our initiation (whitepaper §5.4.3) under the
// peer's lock: of two copies of a response, the second finds no initiation
// in flight.
func (d *Device) consumeResponse(m fastpath.HandshakeMessage, now int64) {
	recv, _ := noise.MessageReceiver(m.Data)
	p := d.pendingPeer(recv)
	if p == nil {
		d.stats.drop(DropUnknownIndex)
		return
	}
	p.mu.Lock()
	defer d.touch(p)
	defer p.mu.Unlock()
	if p.removed || p.hs == nil || !p.hasPending || p.pendingIndex != recv {
		d.stats.drop(DropUnknownIndex)
		return
	}
	if err := p.hs.ConsumeResponse(m.Data); err != nil {
		d.stats.drop(DropHandshakeInvalid)
		if errors.Is(err, noise.DropDecryptFailed) {
			d.warnPSK(p, "initiator", now)
		}
		return
	}
	p.fp.RxBytes.Add(uint64(len(m.Data))) // as in respond
	// The index moves from the handshake to the keypair.
	d.pendMu.Lock()
	delete(d.pending, recv)
	d.pendMu.Unlock()
	p.hasPending = false
	if !d.installLocked(p, recv, now) {
		return
	}
	d.setEndpointFromLocked(p, m, d.dstMACFor(m, p))
	p.ownRecv = max(p.ownRecv, now)
	d.completeLocked(p)
	d.armZeroLocked(p, now)
	d.log.Debug("handshake complete (initiator)", "peer", p.pub)
	// Whitepaper §5.4.6, §6.5: the initiator confirms the session with a
	// transport message, an empty one only if nothing else is waiting:
	// the workers send what they hold once kicked (fastpath.Peer.Holding),
	// as wireguard-go's SendKeepalive after a consumed response queues a
	// keepalive only when its staged queue is empty and then sends the
	// staged packets.
	if !p.fp.Holding() {
		d.keepaliveLocked(p, now)
	}
	d.dp.Kick()
}

// installLocked derives the session's keys from p's completed exchange,
// builds the keypair, publishes it under idx and rotates it into p's slots
// (initiator: Current at once; responder: Next until data arrives on it).
// It returns false (index freed, counted) on failure. p.mu held.
func (d *Device) installLocked(p *peer, idx uint32, now int64) bool {
	keys, err := p.hs.DeriveKeys()
	if err != nil {
		d.dp.Indexes().Free(idx)
		d.stats.drop(DropHandshakeInvalid)
		return false
	}
	kp, err := fastpath.NewKeypair(&keys.Send, &keys.Receive, keys.LocalIndex, keys.RemoteIndex, keys.IsInitiator, now, p.fp)
	keys.Zero()
	if err != nil {
		d.dp.Indexes().Free(idx)
		d.log.Warn("new keypair", "err", err)
		return false
	}
	d.dp.Indexes().Publish(kp.LocalIndex, kp)
	p.owned = append(p.owned, ownedKeypair{kp: kp})
	// The initiator's Rotate also pushes the old Previous out (and the
	// old Current, when a responder's Next took Previous): sweepLocked
	// retires what it names now, the other a tick later.
	dropped := p.fp.Rotate(kp)
	d.sweepLocked(p, dropped)
	d.stats.sessions.Add(1)
	p.handshakeDone = true
	return true
}

// completeLocked records a completed handshake (wireguard-go
// timersHandshakeComplete): the retry stops, the attempts reset, and the wall
// time is noted for the UAPI.
func (d *Device) completeLocked(p *peer) {
	p.kaStaged = false // the initiator sends a keepalive at completion anyway; the responder's caller sends it
	p.retransmitAt = 0
	p.attempts = 0
	p.sentLastMin = false
	p.lastHSWall.Store(d.wall().UnixNano())
}

// armZeroLocked (re)arms the zeroing of all key material RejectAfterTime×3
// after a session was derived (whitepaper §6.3).
func (d *Device) armZeroLocked(p *peer, now int64) {
	p.zeroAt = now + 3*int64(protocol.RejectAfterTime)
}

// send posts pkt, counting a refusal (refused). The timers and the UAPI
// send with it: they never wait for the dataplane.
func (d *Device) send(queue int, pkt fastpath.ControlPacket) bool {
	if !d.dp.Send(queue, pkt) {
		d.refused()
		return false
	}
	return true
}

// refused counts a control packet the dataplane did not take: closed if
// the dataplane says it is closed (closeReporter: a library user that
// closed the engine before the device), else mailbox_full.
func (d *Device) refused() {
	if c, ok := d.dp.(closeReporter); ok && c.Closed() {
		d.stats.drop(DropClosed)
		return
	}
	d.stats.drop(DropMailboxFull)
}

// closeReporter is the optional side of a Dataplane that says whether it
// is closed (fastpath.Engine.Closed).
type closeReporter interface {
	Closed() bool
}

// MailboxWait is the longest a handshake worker waits for room in a
// dataplane worker's full mailbox to post a response, initiation or cookie
// reply (Dataplane.SendWait) before it drops it (mailbox_full): a message
// that cost Curve25519 work, or whose loss costs its peer REKEY_TIMEOUT
// (whitepaper §6.4), is worth a short wait; the bound keeps a stalled
// dataplane from holding the pool for longer, and once a wait for a worker
// ran out the engine refuses at once for that worker until it takes mail
// again (fastpath.Engine.SendWait): a worker that does not run costs each
// handshake worker one wait, not one per message, and the handshakes for
// the other workers' queues go on.
const MailboxWait = 100 * time.Millisecond

// sendWait posts pkt from a handshake worker, waiting up to MailboxWait for
// room; a packet not posted is counted. The caller holds no peer's lock.
func (d *Device) sendWait(queue int, pkt fastpath.ControlPacket) bool {
	if !d.dp.SendWait(queue, pkt, MailboxWait) {
		d.refused()
		return false
	}
	return true
}

// sentLocked records that the control plane sent an authenticated packet
// to p (wireguard-go timersAnyAuthenticatedPacketSent).
func (d *Device) sentLocked(p *peer, now int64) {
	if now > p.ownSent {
		p.ownSent = now
	}
}

// initiateLocked starts a handshake initiation to p (wireguard-go
// SendHandshakeInitiation): at most one per RekeyTimeout (whitepaper §6.1),
// the retry timer armed at RekeyTimeout plus jitter (§6.4). A non-retry
// resets the attempt count. It only decides: once Start has run, the
// message itself (two Curve25519 operations) is made and sent by a
// handshake worker (runInitiation, which arms the retry and the limit again
// from when it leaves), before that inline. p.mu held.
func (d *Device) initiateLocked(p *peer, now int64, isRetry bool) {
	if !isRetry {
		p.attempts = 0
	}
	if p.initSent && now-p.lastInitSent < int64(protocol.RekeyTimeout) {
		return
	}
	if p.hs == nil {
		return
	}
	p.lastInitSent, p.initSent = now, true
	p.fp.HandshakeNeeded.Store(false)
	p.retransmitAt = now + int64(protocol.RekeyTimeout) + int64(d.opts.Jitter())
	if d.pool.async.Load() {
		if !p.initQueued {
			p.initQueued = true
			d.pool.push(p)
		}
		return
	}
	d.sendInitiationLocked(p, now)
}

// sendInitiationLocked makes and sends an initiation (whitepaper §5.4.2),
// replacing the one in flight (makeInitiationLocked). p.mu held.
func (d *Device) sendInitiationLocked(p *peer, now int64) {
	var msg [noise.InitiationSize]byte
	if pkt, ok := d.makeInitiationLocked(p, now, &msg); ok && d.send(p.fp.ID, pkt) {
		d.initiationSent(p, p.attempts+1)
	}
}

// initiationSent counts an initiation the dataplane took (one it refused is
// mailbox_full alone, counted by send or sendWait), and logs it.
func (d *Device) initiationSent(p *peer, attempt int) {
	d.stats.initiationsSent.Add(1)
	d.log.Debug("handshake initiation sent", "peer", p.pub, "attempt", attempt)
}

// makeInitiationLocked makes an initiation into msg, replacing the one in
// flight: its receiver index is released, a new one registered (the index
// table and pending stay consistent: an index is in pending exactly while
// its initiation is p's in flight). It returns the packet to post (the
// caller counts it sent once the dataplane took it: initiationSent), and
// false when there is nothing to send. p.mu held.
func (d *Device) makeInitiationLocked(p *peer, now int64, msg *[noise.InitiationSize]byte) (fastpath.ControlPacket, bool) {
	if p.hs == nil {
		return fastpath.ControlPacket{}, false
	}
	d.dropPendingLocked(p)
	// Without an endpoint there is nowhere to send: stop before the
	// index and the Curve25519 work (a peer with a persistent keepalive
	// and no endpoint retries every Rekey-Timeout; at 100,000 such peers
	// that work alone would take more than two cores).
	ep := p.fp.Endpoint.Load()
	if ep == nil {
		d.stats.drop(DropNoEndpoint)
		return fastpath.ControlPacket{}, false
	}
	idx, err := d.dp.Indexes().Allocate()
	if err != nil {
		d.stats.drop(DropIndexTableFull)
		return fastpath.ControlPacket{}, false
	}
	if err := p.hs.CreateInitiation(msg, idx); err != nil {
		d.dp.Indexes().Free(idx)
		d.log.Warn("create initiation", "peer", p.pub, "err", err)
		return fastpath.ControlPacket{}, false
	}
	p.pendingIndex, p.hasPending = idx, true
	d.pendMu.Lock()
	d.pending[idx] = p
	d.pendMu.Unlock()
	d.armZeroIfIdleLocked(p, now)
	d.sentLocked(p, now)
	return fastpath.ControlPacket{Dst: ep.Dst, Src: ep.Src, DstMAC: ep.DstMAC, Payload: msg[:], Peer: p.fp}, true
}

// armZeroIfIdleLocked arms zeroing for handshake state that no session
// will follow (wireguard-go arms it when it gives up; arming it for every
// exchange in flight bounds the life of its ephemeral key too).
func (d *Device) armZeroIfIdleLocked(p *peer, now int64) {
	if p.zeroAt == 0 {
		p.zeroAt = now + 3*int64(protocol.RejectAfterTime)
	}
}

// sendKeepaliveLocked is keepaliveLocked for a caller holding Device.mu
// (the UAPI) but not p.mu.
func (d *Device) sendKeepaliveLocked(p *peer, now int64) {
	p.mu.Lock()
	if !p.removed {
		d.keepaliveLocked(p, now)
	}
	p.mu.Unlock()
	d.touch(p)
}

// keepaliveLocked sends an empty transport data message (whitepaper
// §6.5) sealed with p's current keypair, or starts a handshake if there is
// no usable one (wireguard-go SendKeepalive → SendStagedPackets). p.mu
// held.
func (d *Device) keepaliveLocked(p *peer, now int64) {
	kp := p.fp.Current.Load()
	ep := p.fp.Endpoint.Load()
	if kp == nil || kp.Dead() || now-kp.Created >= int64(protocol.RejectAfterTime) {
		p.kaStaged = true
		d.initiateLocked(p, now, false)
		return
	}
	if ep == nil {
		d.stats.drop(DropNoEndpoint)
		return
	}
	c, n := kp.ReserveNonces(1)
	if n == 0 {
		d.initiateLocked(p, now, false)
		return
	}
	// A keypair in Current is usable by construction: the initiator's is
	// confirmed by the response, the responder's reaches Current only by
	// promotion on received data (fastpath.Peer.Rotate).
	var buf [noise.KeepaliveSize]byte
	noise.PutTransportHeader(buf[:], kp.RemoteIndex, c)
	out := kp.Seal(buf[:noise.TransportHeaderSize], nil, c)
	d.sentLocked(p, now)
	if d.send(p.fp.ID, fastpath.ControlPacket{Dst: ep.Dst, Src: ep.Src, DstMAC: ep.DstMAC, Payload: out, Peer: p.fp}) {
		d.stats.keepalivesSent.Add(1) // a refused one is mailbox_full alone
	}
	if kp.IsInitiator && now-kp.Created >= int64(protocol.RekeyAfterTime) || c >= protocol.RekeyAfterMessages {
		d.initiateLocked(p, now, false)
	}
}

// SendKeepalive sends a keepalive to the peer with public key k now (or
// starts a handshake if it has no session), as wireguard-go does when a
// persistent keepalive is turned on.
func (d *Device) SendKeepalive(k noise.PublicKey) {
	d.idMu.RLock()
	defer d.idMu.RUnlock()
	d.mu.RLock()
	p := d.byKey[k]
	d.mu.RUnlock()
	if p != nil {
		d.sendKeepaliveLocked(p, d.now())
	}
}
