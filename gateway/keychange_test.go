package gateway

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// TestKeyChangeKeepsReplayRecord: the newest TAI64N timestamp accepted
// from a peer (whitepaper §5.4.2) outlives a change of our private key,
// as the kernel's and wireguard-go's handshake keeps it across one: an
// initiation captured before the private key went from A to B and back
// to A is a replay and is refused (stale timestamp), not answered with a
// response and a new session over the peer's own; so too across a spell
// without a private key (A, none, A).
func TestKeyChangeKeepsReplayRecord(t *testing.T) {
	other, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, between := range []noise.PrivateKey{other, {}} {
		t.Run(map[bool]string{true: "none", false: "other"}[between.IsZero()], func(t *testing.T) {
			keyChangeReplay(t, between)
		})
	}
}

func keyChangeReplay(t *testing.T, between noise.PrivateKey) {
	r := newLightRig(t, 1, 1)
	s := r.sims[0]
	captured := s.initiation(t, 1)
	r.dev.HandleMessage(s.message(captured))
	if n := len(r.responses()); n != 1 {
		t.Fatalf("fresh initiation: %d responses, want 1", n)
	}
	r.dev.SetPrivateKey(between)
	r.dev.SetPrivateKey(r.our)
	r.f.clock.Add(int64(time.Second)) // past the flood window
	stale := r.dev.Stats().Noise.Drops[noise.DropStaleTimestamp]
	r.dev.HandleMessage(s.message(captured))
	if n := len(r.responses()); n != 1 {
		t.Fatalf("initiation replayed after the private key went away and back: %d responses in all, want still 1", n)
	}
	if got := r.dev.Stats().Noise.Drops[noise.DropStaleTimestamp]; got != stale+1 {
		t.Errorf("stale_timestamp drops %d → %d, want one more", stale, got)
	}
	// The peer's next initiation is answered.
	r.dev.HandleMessage(s.message(s.initiation(t, 2)))
	if n := len(r.responses()); n != 2 {
		t.Errorf("fresh initiation after the key change: %d responses in all, want 2", n)
	}
}

// TestKeyChangeKeepsReceiving: a change of our private key stops the
// sessions' sending, not their receiving, as the kernel
// (wg_noise_expire_current_peer_keypairs) and wireguard-go
// (ExpireCurrentKeypairs) do: what the peer still sends on the session
// is delivered, and our next packet for it starts a handshake at once.
// Before, the key change cleared the keypairs and the peer's packets were
// dropped (unknown_index) until the peer itself handshook again.
func TestKeyChangeKeepsReceiving(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", ourEP: "127.0.0.1:1"})
	kp := r.establishAsInitiator()
	fp := r.fp()
	if !r.f.sendData(fp, ourPacket(1)) {
		t.Fatal("no data sent on the new session")
	}
	if _, ok := r.waitWG(waitLimit); !ok {
		t.Fatal("wireguard-go got nothing on the new session")
	}
	other, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	r.dev.SetPrivateKey(other)
	r.dev.SetPrivateKey(r.ourKey)
	if kp.Dead() {
		t.Fatal("the key change killed the session's keypair: what the peer sends on it is dropped")
	}
	r.wgSend(2)
	if _, ok := r.waitInner(waitLimit); !ok {
		t.Fatal("wireguard-go's packet on the session from before the key change was not delivered")
	}
	if r.f.sendData(fp, ourPacket(3)) {
		t.Fatal("sent on a session from before the key change; want a new handshake first")
	}
	n := r.f.nsent()
	r.dev.Tick(r.now())
	sent := r.f.sentSince(n)
	if len(sent) == 0 || sent[0].typ != noise.TypeInitiation {
		t.Fatalf("after the key change, data waiting: sent %v, want an initiation at once", types(sent))
	}
	if !r.pump(waitLimit, func() bool { c := fp.Current.Load(); return c != nil && c != kp }) {
		t.Fatal("no new session after the key change")
	}
	if !r.f.sendData(fp, ourPacket(4)) {
		t.Fatal("no data sent on the new session")
	}
	if _, ok := r.waitWG(waitLimit); !ok {
		t.Fatal("wireguard-go got nothing on the new session")
	}
}
