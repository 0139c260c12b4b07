package gateway

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// TestSessionCounters: during a preshared-key mismatch the responder
// installs keypairs that never carry data; they count as installed and, once
// freed, as expired unconfirmed, never as live sessions. A working session
// (another rig: wireguard-go's timestamps are coarser than package noise's)
// is one live session.
func TestSessionCounters(t *testing.T) {
	good := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	good.establishAsResponder()
	s := good.dev.Stats()
	if s.LiveSessions != 1 || s.KeypairsInstalledTotal != 1 || s.ResponderUnconfirmedTotal != 0 {
		t.Errorf("after a working handshake: live %d, installed %d, unconfirmed %d; want 1, 1, 0", s.LiveSessions, s.KeypairsInstalledTotal, s.ResponderUnconfirmedTotal)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"live_sessions", "keypairs_installed_total", "sessions", "responder_keypairs_expired_unconfirmed_total"} {
		if _, ok := m[k]; !ok {
			t.Errorf("stats JSON has no %q: %s", k, b)
		}
	}

	r := newRig(t, rigOptions{})
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	wrong, err := noise.NewPresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	h := noise.NewHandshake(noise.NewStaticIdentity(r.wgKey, nil), r.ourKey.PublicKey(), wrong)
	const tries = 3
	for i := range tries {
		mark := r.f.nsent()
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: initiation(t, h)})
		if n := len(ofType(r.f.sentSince(mark), noise.TypeResponse, 0)); n != 1 {
			t.Fatalf("initiation %d: sent %v, want a response", i+1, types(r.f.sentSince(mark)))
		}
		r.advance(protocol.RekeyTimeout) // the initiator's retry
	}
	s = r.dev.Stats()
	if s.KeypairsInstalledTotal != tries || s.Sessions != tries || s.LiveSessions != 0 {
		t.Errorf("after %d mismatched handshakes: installed %d (sessions %d), live %d; want %d, %d, 0",
			tries, s.KeypairsInstalledTotal, s.Sessions, s.LiveSessions, tries, tries)
	}
	if s.ResponderUnconfirmedTotal != tries-1 {
		t.Errorf("responder keypairs expired unconfirmed = %d, want %d (each replaced by the next)", s.ResponderUnconfirmedTotal, tries-1)
	}
	for r.now()-fakeEpoch < int64(4*protocol.RejectAfterTime) {
		r.advance(time.Second)
	}
	if got := r.dev.Stats().ResponderUnconfirmedTotal; got != tries {
		t.Errorf("after RejectAfterTime × 3: expired unconfirmed = %d, want %d", got, tries)
	}

}

// TestRemovePeerTellsWorkers: removing a peer marks its fastpath.Peer
// Removed (the workers free what they hold for it), and resetting a
// session (zeroing) raises FlushHeld.
func TestRemovePeerTellsWorkers(t *testing.T) {
	r := newRig(t, rigOptions{})
	fp := r.fp()
	fp.HandshakeNeeded.Store(true)
	r.dev.mu.Lock()
	r.dev.resetSessionLocked(r.dev.byFP[fp])
	r.dev.mu.Unlock()
	if !fp.FlushHeld.Load() || fp.Removed.Load() {
		t.Errorf("after a session reset: FlushHeld %v Removed %v, want true, false", fp.FlushHeld.Load(), fp.Removed.Load())
	}
	if !r.dev.RemovePeer(r.wgPub) {
		t.Fatal("RemovePeer = false")
	}
	if !fp.Removed.Load() {
		t.Error("after RemovePeer: Removed = false, want true")
	}
}

// TestPSKMismatchWarned: a preshared key that differs between the
// gateway and a peer is logged at warning level, with the peer's key,
// at most once a minute: as responder once the peer left pskRun sessions
// in a row unused, as initiator at the first response that does not
// authenticate. Before, it showed only in counters.
func TestPSKMismatchWarned(t *testing.T) {
	const want = "its PresharedKey for this gateway"
	r := newRig(t, rigOptions{})
	var logs bytes.Buffer
	r.dev.log = slog.New(slog.NewTextHandler(&logs, nil))
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	wrong, err := noise.NewPresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	h := noise.NewHandshake(noise.NewStaticIdentity(r.wgKey, nil), r.ourKey.PublicKey(), wrong)
	for i := range pskRun + 1 {
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: initiation(t, h)})
		r.advance(protocol.RekeyTimeout)
		if i < pskRun-1 && strings.Contains(logs.String(), want) {
			t.Fatalf("warned after %d unused sessions:\n%s", i+1, logs.String())
		}
	}
	pub := r.wgKey.PublicKey()
	if n := strings.Count(logs.String(), want); n != 1 || !strings.Contains(logs.String(), pub.Base64()) {
		t.Errorf("as responder: %d warnings (want 1, naming %s):\n%s", n, pub.Base64(), logs.String())
	}

	// As initiator: only this side has a preshared key for the peer
	// (stock wireguard-go, none).
	r2 := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	logs.Reset()
	r2.dev.log = slog.New(slog.NewTextHandler(&logs, nil))
	pub2 := r2.wgKey.PublicKey()
	if err := r2.dev.IpcSet(strings.NewReader("public_key=" + pub2.Hex() + "\npreshared_key=" + wrong.Hex() + "\n")); err != nil {
		t.Fatal(err)
	}
	fp := r2.fp()
	fp.HandshakeNeeded.Store(true)
	r2.dev.Tick(r2.now())
	r2.pump(waitLimit, func() bool { return strings.Contains(logs.String(), want) })
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "decryption_failed") {
		t.Errorf("as initiator: no warning naming the failed response:\n%s", logs.String())
	}
}
