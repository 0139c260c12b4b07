package gateway

// The warnings of handshakes that fail for a configuration mistake the
// counters alone would hide: a peer without this gateway's public key, an
// unknown peer, a preshared key that differs. Each at most once a minute;
// and UAPI requests refused, at most ten a minute (warnUAPI).

import (
	"net/netip"
	"sync"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// badMAC1Every is how often at most warnBadMAC1 logs.
const badMAC1Every = int64(time.Minute)

// warnBadMAC1 logs, at most once per badMAC1Every, a handshake message
// whose MAC1 did not verify against this device's public key (whitepaper
// §5.4.4): the mark of a peer configured with another public key for
// this gateway, the commonest mistake in setting up a tunnel, which
// otherwise shows only as a counter (wireguard-go and the kernel log it at
// debug level only). Safe for concurrent use.
func (d *Device) warnBadMAC1(src netip.AddrPort, now int64) {
	last := d.badMAC1Logged.Load()
	if last != 0 && now-last < badMAC1Every || !d.badMAC1Logged.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn("handshake message with a bad MAC1 dropped: the sender does not have this gateway's public key as its peer (compare this gateway's public key with the PublicKey in the sender's [Peer]), or it is not WireGuard; counted as handshake_invalid (bad_mac1), logged at most once a minute",
		"src", src)
}

// warnUnknownPeer logs, at most once per badMAC1Every, an initiation
// whose MAC1 verified but whose initiator's static key (decrypted from
// it, whitepaper §5.4.2) is no peer's: a device removed, or whose key was
// rotated, that still tries, or one whose key was not added yet. The key
// and the source are logged so that the operator can tell which; the
// kernel logs only "Invalid handshake initiation from" the source, at
// debug level. The message is unauthenticated (anyone who knows this
// gateway's public key can make one with any key), hence the rate.
// Safe for concurrent use.
func (d *Device) warnUnknownPeer(k noise.PublicKey, src netip.AddrPort, now int64) {
	last := d.unknownPeerLogged.Load()
	if last != 0 && now-last < badMAC1Every || !d.unknownPeerLogged.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn("handshake initiation from a public key that is no peer of this gateway dropped: a device removed or whose key changed still tries, or its key is not added yet (wg set NAME peer KEY allowed-ips ...); counted as unknown_peer, logged at most once a minute",
		"public_key", k.Base64(), "src", src)
}

// pskRun is how many responder keypairs in a row a peer leaves unused,
// with no session of it in use, before warnPSK tells: one is a peer gone
// after its handshake; a peer whose preshared key differs retries every
// RekeyTimeout, each time in vain.
const pskRun = 3

// warnPSK logs, at most once per badMAC1Every, the signs of a preshared key
// that differs between this gateway and peer p (whitepaper §5.2: it is
// mixed into the keys of the handshake's last step, so only that step
// fails): as initiator, the response to our initiation that did not
// authenticate (its empty payload's AEAD, §5.4.3, counted as
// handshake_invalid, decryption_failed); as responder (role), pskRun
// sessions in a row that the peer never used (it could not read our
// response; counted in responder_keypairs_expired_unconfirmed). Neither
// wireguard-go nor the kernel logs either. Safe for concurrent use.
func (d *Device) warnPSK(p *peer, role string, now int64) {
	last := d.pskLogged.Load()
	if last != 0 && now-last < badMAC1Every || !d.pskLogged.CompareAndSwap(last, now) {
		return
	}
	msg := "a peer's handshakes fail at their last step: its PresharedKey for this gateway differs from this gateway's for it (or only one side has one); its response to our initiation did not authenticate (counted as handshake_invalid, decryption_failed); logged at most once a minute"
	if role == "responder" {
		msg = "a peer's handshakes fail at their last step: its PresharedKey for this gateway likely differs from this gateway's for it (or only one side has one), or our responses do not reach it (a firewall or NAT on the way back); it sent no data under the sessions our responses gave it (counted in responder_keypairs_expired_unconfirmed); logged at most once a minute"
	}
	d.log.Warn(msg, "public_key", p.pub.Base64())
}

// uapiWarnBurst is how many refused UAPI requests warnUAPI logs a minute.
const uapiWarnBurst = 10

// uapiWarnLimit is warnUAPI's budget: the minute that began at start, the
// lines logged in it, and the refusals not logged since the last line.
type uapiWarnLimit struct {
	mu            sync.Mutex
	start         int64
	n, suppressed int
}

// warnUAPI logs a UAPI request the device refused (or could not read), at
// most uapiWarnBurst a minute; the line after a quiet spell says how many
// were not logged. A local client in a loop wrote a line each, without
// bound (two thirds of a soak's log). Safe for concurrent use.
func (d *Device) warnUAPI(err error) {
	now := d.now()
	l := &d.uapiWarns
	l.mu.Lock()
	if now-l.start >= int64(time.Minute) {
		l.start, l.n = now, 0
	}
	l.n++
	if l.n > uapiWarnBurst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		d.log.Warn("uapi", "err", err, "not_logged_before", suppressed)
		return
	}
	d.log.Warn("uapi", "err", err)
}
