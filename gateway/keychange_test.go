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
