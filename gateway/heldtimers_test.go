package gateway

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// TestRetryWhileDataHeld: while packets keep being held for a handshake
// that gets no answer (the workers raise HandshakeNeeded for each), the
// attempts' count starts again with each, as wireguard-go's and the
// kernel's do for every packet queued without a usable keypair: the
// retries go on every RekeyTimeout past the 90 s of Rekey-Attempt-Time,
// and nothing held is flushed. Before, the gateway gave up 90 s after
// the first initiation and dropped what it held, so a peer back after a
// two-minute outage got only what the LAN sent after the give-up.
func TestRetryWhileDataHeld(t *testing.T) {
	const jitter = 200 * time.Millisecond
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", fixJitter: jitter})
	r.f.drop.Store(true)
	fp := r.fp()
	fp.HandshakeNeeded.Store(true)
	t0 := r.now()
	r.dev.Tick(t0)
	const step = 50 * time.Millisecond
	for i := 0; r.now()-t0 < int64(150*time.Second); i++ {
		if i%20 == 0 { // a packet held every second
			fp.HandshakeNeeded.Store(true)
		}
		r.advance(step)
		if fp.FlushHeld.Load() {
			t.Fatalf("held packets flushed (gave up) at t0+%.1fs while packets kept coming", secs(r.now()-t0))
		}
	}
	inits := ofType(r.f.sentSince(0), noise.TypeInitiation, noise.InitiationSize)
	if least := int(150*time.Second/(protocol.RekeyTimeout+jitter+step)) - 1; len(inits) < least {
		t.Errorf("initiations in 150 s = %d, want at least %d (one every Rekey-Timeout, past the 20 of a give-up)", len(inits), least)
	}
}

// TestStagedKeepaliveAsResponder: a keepalive that found no session (a
// persistent keepalive at start, the peer not heard from) is sent once the
// peer's handshake gives us a session, at its key confirmation by the
// first data, as wireguard-go sends the keepalive it staged; the
// persistent keepalives count from it. Before, it was forgotten: the first
// keepalive was the passive one 10 s later, the persistent ones 10 s late,
// and the responder had to initiate a rekey the initiator's keepalive would
// have made at 175 s.
func TestStagedKeepaliveAsResponder(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", keepalive: 25 * time.Second})
	p := r.dev.byKey[r.wgPub]
	r.dev.mu.Lock()
	r.dev.sendKeepaliveLocked(p, r.now()) // no session, no endpoint: a handshake that cannot leave
	r.dev.mu.Unlock()
	mark := r.f.nsent()
	r.establishAsResponder()
	t0 := r.fp().Stamps.LastDataReceived.Load()
	r.advance(100 * time.Millisecond)
	ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)
	if len(ka) != 1 {
		t.Fatalf("keepalives within 100 ms of the session = %d, want 1 (the staged one); %v", len(ka), types(r.f.sentSince(mark)))
	}
	if at := ka[0].at - t0; at < 0 || at > int64(100*time.Millisecond) {
		t.Errorf("staged keepalive at +%.3fs, want at the session's confirmation", secs(at))
	}
}
