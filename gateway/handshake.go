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
// §5.3): under load while the handshake queue is at least 1/8 full
// (Dataplane.UnderLoad) and for noise.UnderLoadAfterTime (1 s) after.
// d.mu held.
func (d *Device) isUnderLoad(now int64) bool {
	if d.dp.UnderLoad() {
		d.underLoad, d.wasLoaded = now, true
		return true
	}
	return d.wasLoaded && now-d.underLoad < int64(noise.UnderLoadAfterTime)
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
// peer's last accepted one. An accepted initiation is answered from the
// queue it arrived on, to its outer source, which becomes the peer's
// endpoint. Bad messages are dropped and
// counted (Stats), never returned as errors. Start's loop calls it for every
// message of Dataplane.Handshakes; tests may call it directly. m.Data is
// only read.
func (d *Device) HandleMessage(m fastpath.HandshakeMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	msg := m.Data
	if len(msg) < 4 || msg[1] != 0 || msg[2] != 0 || msg[3] != 0 {
		d.stats.drop(DropUnknownType)
		return
	}
	if d.id == nil {
		d.stats.drop(DropNoPrivateKey)
		return
	}
	switch msg[0] {
	case noise.TypeInitiation, noise.TypeResponse:
		underLoad := d.isUnderLoad(now)
		v, _ := d.id.CookieChecker().Check(msg, m.Src, underLoad)
		switch v {
		case noise.VerdictDrop:
			d.stats.drop(DropHandshakeInvalid)
			return
		case noise.VerdictCookie:
			if !d.replies.allow(now) {
				d.stats.drop(DropCookieBudget)
				return
			}
			var reply [noise.CookieReplySize]byte
			if err := d.id.CookieChecker().CreateReply(&reply, msg, m.Src); err != nil {
				d.stats.drop(DropHandshakeInvalid)
				return
			}
			d.stats.cookieRepliesSent.Add(1)
			d.sendLocked(m.Queue, fastpath.ControlPacket{Dst: m.Src, SrcPort: m.Dst.Port(), DstMAC: m.SrcMAC, Payload: reply[:]})
			return
		}
		if underLoad && !d.limiter.Allow(m.Src.Addr()) {
			d.stats.drop(DropRateLimited)
			return
		}
		if msg[0] == noise.TypeInitiation {
			d.consumeInitiationLocked(m, now)
		} else {
			d.consumeResponseLocked(m, now)
		}
	case noise.TypeCookieReply:
		recv, ok := noise.MessageReceiver(msg)
		if !ok {
			d.stats.drop(DropHandshakeInvalid)
			return
		}
		p := d.pending[recv]
		if p == nil {
			if kp := d.dp.Indexes().Lookup(recv); kp != nil {
				p = d.byFP[kp.Peer]
			}
		}
		if p == nil || p.hs == nil {
			d.stats.drop(DropUnknownIndex)
			return
		}
		if err := p.hs.ConsumeCookieReply(msg); err != nil {
			d.stats.drop(DropHandshakeInvalid)
			return
		}
		d.log.Debug("cookie reply consumed", "peer", p.pub)
	default:
		d.stats.drop(DropUnknownType)
	}
}

func (d *Device) consumeInitiationLocked(m fastpath.HandshakeMessage, now int64) {
	hs, err := d.id.ConsumeInitiation(m.Data, func(k noise.PublicKey) *noise.Handshake {
		if p := d.byKey[k]; p != nil {
			return p.hs
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, noise.DropUnknownPeer) {
			d.stats.drop(DropUnknownPeer)
		} else {
			d.stats.drop(DropHandshakeInvalid)
		}
		return
	}
	p := d.byKey[hs.RemoteStatic()]
	if p == nil || p.hs != hs {
		d.stats.drop(DropUnknownPeer)
		return
	}
	// The responder's exchange replaces our own initiation in flight, if
	// any (simultaneous initiations: both sides answer, the later session
	// wins, as in wireguard-go).
	d.dropPendingLocked(p)
	idx, err := d.dp.Indexes().Allocate()
	if err != nil {
		p.hs.Clear()
		d.stats.drop(DropIndexTableFull)
		return
	}
	var resp [noise.ResponseSize]byte
	if err := p.hs.CreateResponse(&resp, idx); err != nil {
		d.dp.Indexes().Free(idx)
		d.stats.drop(DropHandshakeInvalid)
		return
	}
	if !d.installLocked(p, idx, now) {
		return
	}
	d.setEndpointFromLocked(p, m)
	p.ownRecv = max(p.ownRecv, now)
	d.stats.responsesSent.Add(1)
	d.armZeroLocked(p, now)
	d.sentLocked(p, now)
	d.sendLocked(m.Queue, fastpath.ControlPacket{Dst: m.Src, SrcPort: m.Dst.Port(), DstMAC: d.dstMACFor(m), Payload: resp[:], Peer: p.fp})
	d.log.Debug("handshake response sent", "peer", p.pub, "endpoint", m.Src)
	d.dp.Kick()
}

func (d *Device) consumeResponseLocked(m fastpath.HandshakeMessage, now int64) {
	recv, _ := noise.MessageReceiver(m.Data)
	p := d.pending[recv]
	if p == nil || p.hs == nil {
		d.stats.drop(DropUnknownIndex)
		return
	}
	if err := p.hs.ConsumeResponse(m.Data); err != nil {
		d.stats.drop(DropHandshakeInvalid)
		return
	}
	// The index moves from the handshake to the keypair.
	delete(d.pending, recv)
	p.hasPending = false
	if !d.installLocked(p, recv, now) {
		return
	}
	d.setEndpointFromLocked(p, m)
	p.ownRecv = max(p.ownRecv, now)
	d.completeLocked(p)
	d.armZeroLocked(p, now)
	d.log.Debug("handshake complete (initiator)", "peer", p.pub)
	// Whitepaper §6.5 / §5.4.6: the initiator confirms the session with a
	// transport message, an empty one if nothing else is waiting. Workers
	// also send held packets once kicked; the keepalive is sent regardless
	// (wireguard-go does the same: SendKeepalive after a consumed response).
	d.sendKeepaliveLocked(p, now)
	d.dp.Kick()
}

// installLocked derives the session's keys from p's completed exchange,
// builds the keypair, publishes it under idx and rotates it into p's slots
// (initiator: Current at once; responder: Next until data arrives on it).
// It returns false (index freed, counted) on failure.
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
	// The initiator's Rotate also pushes the old Previous out (and zeroes
	// it itself when Next was occupied): sweepLocked catches it.
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
	p.retransmitAt = 0
	p.attempts = 0
	p.sentLastMin = false
	p.lastHSWall = d.wall()
}

// armZeroLocked (re)arms the zeroing of all key material RejectAfterTime×3
// after a session was derived (whitepaper §6.3).
func (d *Device) armZeroLocked(p *peer, now int64) {
	p.zeroAt = now + 3*int64(protocol.RejectAfterTime)
}

func (d *Device) dstMACFor(m fastpath.HandshakeMessage) [6]byte {
	if d.opts.Resolve != nil {
		if mac, ok := d.opts.Resolve(m.Src.Addr()); ok {
			return mac
		}
	}
	return m.SrcMAC
}

// setEndpointFromLocked roams p to the outer source of an authenticated
// handshake message (whitepaper §2.1, endpoints and roaming: the endpoint is the source of
// the most recent authenticated packet).
func (d *Device) setEndpointFromLocked(p *peer, m fastpath.HandshakeMessage) {
	old := p.fp.Endpoint.Load()
	mac := d.dstMACFor(m)
	if old != nil && old.Dst == m.Src && old.Src == m.Dst.Addr() && old.DstMAC == mac {
		return
	}
	p.fp.Endpoint.Store(&fastpath.Endpoint{Dst: m.Src, Src: m.Dst.Addr(), DstMAC: mac, SrcMAC: d.opts.WANMAC})
	p.fp.NeedNeighbour.Store(false)
}

// sendLocked posts pkt, counting a full mailbox.
func (d *Device) sendLocked(queue int, pkt fastpath.ControlPacket) bool {
	if !d.dp.Send(queue, pkt) {
		d.stats.drop(DropMailboxFull)
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

// initiateLocked sends a handshake initiation to p (wireguard-go
// SendHandshakeInitiation): at most one per RekeyTimeout (whitepaper §6.1),
// the retry timer armed at RekeyTimeout plus jitter (§6.4). A non-retry
// resets the attempt count.
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
	d.dropPendingLocked(p)
	idx, err := d.dp.Indexes().Allocate()
	if err != nil {
		d.stats.drop(DropIndexTableFull)
		return
	}
	var msg [noise.InitiationSize]byte
	if err := p.hs.CreateInitiation(&msg, idx); err != nil {
		d.dp.Indexes().Free(idx)
		d.log.Warn("create initiation", "peer", p.pub, "err", err)
		return
	}
	p.pendingIndex, p.hasPending = idx, true
	d.pending[idx] = p
	d.armZeroIfIdleLocked(p, now)
	ep := p.fp.Endpoint.Load()
	if ep == nil {
		d.stats.drop(DropNoEndpoint)
		return
	}
	d.stats.initiationsSent.Add(1)
	d.sentLocked(p, now)
	d.sendLocked(p.fp.ID, fastpath.ControlPacket{Dst: ep.Dst, DstMAC: ep.DstMAC, Payload: msg[:], Peer: p.fp})
	d.log.Debug("handshake initiation sent", "peer", p.pub, "retry", isRetry, "attempt", p.attempts+1)
}

// armZeroIfIdleLocked arms zeroing for handshake state that no session
// will follow (wireguard-go arms it when it gives up; arming it for every
// exchange in flight bounds the life of its ephemeral key too).
func (d *Device) armZeroIfIdleLocked(p *peer, now int64) {
	if p.zeroAt == 0 {
		p.zeroAt = now + 3*int64(protocol.RejectAfterTime)
	}
}

// sendKeepaliveLocked sends an empty transport data message (whitepaper
// §6.5) sealed with p's current keypair, or starts a handshake if there is
// no usable one (wireguard-go SendKeepalive → SendStagedPackets).
func (d *Device) sendKeepaliveLocked(p *peer, now int64) {
	kp := p.fp.Current.Load()
	ep := p.fp.Endpoint.Load()
	if kp == nil || kp.Dead() || now-kp.Created >= int64(protocol.RejectAfterTime) {
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
	d.stats.keepalivesSent.Add(1)
	d.sentLocked(p, now)
	d.sendLocked(p.fp.ID, fastpath.ControlPacket{Dst: ep.Dst, DstMAC: ep.DstMAC, Payload: out, Peer: p.fp})
	if kp.IsInitiator && now-kp.Created >= int64(protocol.RekeyAfterTime) || c >= protocol.RekeyAfterMessages {
		d.initiateLocked(p, now, false)
	}
}

// SendKeepalive sends a keepalive to the peer with public key k now (or
// starts a handshake if it has no session), as wireguard-go does when a
// persistent keepalive is turned on.
func (d *Device) SendKeepalive(k noise.PublicKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.byKey[k]; p != nil {
		d.sendKeepaliveLocked(p, d.now())
	}
}
