package noise_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/tai64n"

	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// fakeClock is an injected clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// pair is two of our own identities that know each other: the known
// answers are in interop_test.go; these tests are about rejection.
type pair struct {
	clock        *fakeClock
	idI, idR     *noise.StaticIdentity
	hsI, hsR     *noise.Handshake // initiator's view of R, responder's view of I
	lookupR      func(noise.PublicKey) *noise.Handshake
	initiatorSrc netip.AddrPort
}

func newPair(t testing.TB, psk noise.PresharedKey) *pair {
	t.Helper()
	p := &pair{clock: newFakeClock(), initiatorSrc: netip.MustParseAddrPort("198.18.2.1:40000")}
	kI, _ := noise.NewPrivateKey()
	kR, _ := noise.NewPrivateKey()
	p.idI = noise.NewStaticIdentity(kI, p.clock.Now)
	p.idR = noise.NewStaticIdentity(kR, p.clock.Now)
	p.hsI = noise.NewHandshake(p.idI, p.idR.PublicKey(), psk)
	p.hsR = noise.NewHandshake(p.idR, p.idI.PublicKey(), psk)
	pubI := p.idI.PublicKey()
	p.lookupR = func(pk noise.PublicKey) *noise.Handshake {
		if pk == pubI {
			return p.hsR
		}
		return nil
	}
	return p
}

func (p *pair) initiation(t testing.TB, index uint32) []byte {
	t.Helper()
	var m [noise.InitiationSize]byte
	if err := p.hsI.CreateInitiation(&m, index); err != nil {
		t.Fatalf("CreateInitiation: %v", err)
	}
	return m[:]
}

func TestHandshakeOwnPair(t *testing.T) {
	for _, tc := range pskCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.psk)
			init := p.initiation(t, 1)
			h, err := p.idR.ConsumeInitiation(init, p.lookupR)
			if err != nil || h != p.hsR {
				t.Fatalf("ConsumeInitiation = %p, %v; want %p, nil", h, err, p.hsR)
			}
			var resp [noise.ResponseSize]byte
			if err := h.CreateResponse(&resp, 2); err != nil {
				t.Fatal(err)
			}
			if err := p.hsI.ConsumeResponse(resp[:]); err != nil {
				t.Fatalf("ConsumeResponse = %v", err)
			}
			kI, err1 := p.hsI.DeriveKeys()
			kR, err2 := p.hsR.DeriveKeys()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if kI.Send != kR.Receive || kI.Receive != kR.Send || kI.Send == kI.Receive {
				t.Errorf("keys do not pair up: %x %x / %x %x", kI.Send, kI.Receive, kR.Send, kR.Receive)
			}
			if kI.LocalIndex != 1 || kI.RemoteIndex != 2 || kR.LocalIndex != 2 || kR.RemoteIndex != 1 {
				t.Errorf("indexes = %d/%d %d/%d, want 1/2 2/1", kI.LocalIndex, kI.RemoteIndex, kR.LocalIndex, kR.RemoteIndex)
			}
			if _, err := p.hsI.DeriveKeys(); !errors.Is(err, noise.ErrState) {
				t.Errorf("DeriveKeys twice = %v, want ErrState", err)
			}
			kI.Zero()
			if kI.Send != ([32]byte{}) || kI.Receive != ([32]byte{}) {
				t.Errorf("Keys.Zero left key material")
			}
		})
	}
}

func TestPresharedKeyMismatch(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	other, _ := noise.NewPresharedKey()
	p.hsR.SetPresharedKey(other)
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 1), p.lookupR); err != nil {
		t.Fatal(err) // the psk enters only at the response (IKpsk2)
	}
	var resp [noise.ResponseSize]byte
	if err := p.hsR.CreateResponse(&resp, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.hsI.ConsumeResponse(resp[:]); err != noise.DropDecryptFailed {
		t.Errorf("ConsumeResponse(response under another psk) = %v, want %v", err, noise.DropDecryptFailed)
	}
	if p.hsI.State() != noise.StateInitiationCreated {
		t.Errorf("state after failed response = %v, want unchanged", p.hsI.State())
	}
}

// TestConsumeInitiationRejects: malformed, forged, replayed and flooding
// initiations are refused with their reason and counted.
func TestConsumeInitiationRejects(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	good := p.initiation(t, 9)

	// restamp recomputes MAC1 (and MAC2) as the real initiator would, so the
	// check under test is the one after MAC1.
	restamp := func(m []byte) []byte {
		if err := p.hsI.CookieGenerator().AddMACs(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	mutate := func(f func(m []byte) []byte) []byte { return f(bytes.Clone(good)) }

	tests := []struct {
		name   string
		msg    []byte
		lookup func(noise.PublicKey) *noise.Handshake
		want   noise.DropReason
	}{
		{"empty", nil, p.lookupR, noise.DropWrongSize},
		{"short", good[:147], p.lookupR, noise.DropWrongSize},
		{"long", append(bytes.Clone(good), 0), p.lookupR, noise.DropWrongSize},
		{"type 2", mutate(func(m []byte) []byte { m[0] = 2; return m }), p.lookupR, noise.DropWrongType},
		{"reserved byte", mutate(func(m []byte) []byte { m[1] = 1; return m }), p.lookupR, noise.DropWrongType},
		{"mac1 flipped", mutate(func(m []byte) []byte { m[noise.InitiationOffsetMAC1] ^= 1; return m }), p.lookupR, noise.DropBadMAC1},
		{"body flipped, mac1 stale", mutate(func(m []byte) []byte { m[50] ^= 1; return m }), p.lookupR, noise.DropBadMAC1},
		{"static flipped", mutate(func(m []byte) []byte { m[noise.InitiationOffsetStatic] ^= 1; return restamp(m) }), p.lookupR, noise.DropDecryptFailed},
		{"timestamp flipped", mutate(func(m []byte) []byte { m[noise.InitiationOffsetTimestamp] ^= 1; return restamp(m) }), p.lookupR, noise.DropDecryptFailed},
		{"low-order ephemeral", mutate(func(m []byte) []byte {
			clear(m[noise.InitiationOffsetEphemeral:noise.InitiationOffsetStatic])
			return restamp(m)
		}), p.lookupR, noise.DropInvalidPublicKey},
		{"unknown peer", good, func(noise.PublicKey) *noise.Handshake { return nil }, noise.DropUnknownPeer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := p.idR.Stats().Dropped(tc.want)
			h, err := p.idR.ConsumeInitiation(tc.msg, tc.lookup)
			if h != nil || err != tc.want {
				t.Errorf("ConsumeInitiation(%s) = %p, %v; want nil, %v", tc.name, h, err, tc.want)
			}
			if got := p.idR.Stats().Dropped(tc.want); got != before+1 {
				t.Errorf("Dropped(%v) = %d, want %d", tc.want, got, before+1)
			}
		})
	}

	// Accepted once, then the same message is a replay.
	if _, err := p.idR.ConsumeInitiation(good, p.lookupR); err != nil {
		t.Fatalf("ConsumeInitiation(good) = %v", err)
	}
	p.clock.Advance(time.Second)
	if _, err := p.idR.ConsumeInitiation(good, p.lookupR); err != noise.DropStaleTimestamp {
		t.Errorf("ConsumeInitiation(replayed) = %v, want %v", err, noise.DropStaleTimestamp)
	}

	// An older timestamp from a fresh initiator state is stale too.
	old := noise.NewHandshake(p.idI, p.idR.PublicKey(), noise.PresharedKey{})
	past := tai64n.Now()
	binary.BigEndian.PutUint64(past[:8], binary.BigEndian.Uint64(past[:8])-10)
	noise.SetTimestampFunc(old, func() tai64n.Timestamp { return past })
	var m [noise.InitiationSize]byte
	if err := old.CreateInitiation(&m, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := p.idR.ConsumeInitiation(m[:], p.lookupR); err != noise.DropStaleTimestamp {
		t.Errorf("ConsumeInitiation(older timestamp) = %v, want %v", err, noise.DropStaleTimestamp)
	}
}

// TestInitiationFlood: a second initiation within HandshakeInitiationRate
// (20 ms) of the last accepted one is refused; after it, accepted.
func TestInitiationFlood(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	// A frozen TAI64N shows that our initiator still sends increasing ones.
	frozen := tai64n.Now()
	noise.SetTimestampFunc(p.hsI, func() tai64n.Timestamp { return frozen })
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 1), p.lookupR); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(noise.HandshakeInitiationRate)
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 2), p.lookupR); err != noise.DropFlood {
		t.Errorf("ConsumeInitiation(after %v) = %v, want %v", noise.HandshakeInitiationRate, err, noise.DropFlood)
	}
	p.clock.Advance(time.Millisecond)
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 3), p.lookupR); err != nil {
		t.Errorf("ConsumeInitiation(after %v) = %v, want nil", noise.HandshakeInitiationRate+time.Millisecond, err)
	}
}

// TestWallClockSteppedBack: the TAI64N timestamp is wall time (whitepaper
// §5.4.2), and a responder refuses one not newer than the last it accepted.
// After the initiator's wall clock steps back an hour, its next initiation
// still carries a newer timestamp than the last it sent, so the responder
// accepts it rather than refusing every initiation until the clock catches
// up.
func TestWallClockSteppedBack(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	wall := tai64n.Now()
	noise.SetTimestampFunc(p.hsI, func() tai64n.Timestamp { return wall })
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 1), p.lookupR); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(wall[:8], binary.BigEndian.Uint64(wall[:8])-3600)
	p.clock.Advance(time.Second) // past the flood limit, on the monotonic clock
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 2), p.lookupR); err != nil {
		t.Errorf("ConsumeInitiation(after the wall clock stepped back 1 h) = %v, want nil", err)
	}
}

func TestConsumeResponseRejects(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 5), p.lookupR); err != nil {
		t.Fatal(err)
	}
	var resp [noise.ResponseSize]byte
	if err := p.hsR.CreateResponse(&resp, 6); err != nil {
		t.Fatal(err)
	}
	if err := p.hsR.CreateResponse(&resp, 6); !errors.Is(err, noise.ErrState) {
		t.Errorf("CreateResponse twice = %v, want ErrState", err)
	}
	good := resp[:]
	restamp := func(m []byte) []byte {
		if err := p.hsR.CookieGenerator().AddMACs(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	mutate := func(f func(m []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		msg  []byte
		want noise.DropReason
	}{
		{"short", good[:91], noise.DropWrongSize},
		{"initiation size", make([]byte, noise.InitiationSize), noise.DropWrongSize},
		{"type 1", mutate(func(m []byte) []byte { m[0] = 1; return m }), noise.DropWrongType},
		{"mac1 flipped", mutate(func(m []byte) []byte { m[noise.ResponseOffsetMAC1+3] ^= 0x80; return m }), noise.DropBadMAC1},
		{"wrong receiver", mutate(func(m []byte) []byte { m[noise.ResponseOffsetReceiver] ^= 1; return restamp(m) }), noise.DropUnexpectedState},
		{"empty flipped", mutate(func(m []byte) []byte { m[noise.ResponseOffsetEmpty] ^= 1; return restamp(m) }), noise.DropDecryptFailed},
		{"ephemeral flipped", mutate(func(m []byte) []byte { m[noise.ResponseOffsetEphemeral] ^= 1; return restamp(m) }), noise.DropDecryptFailed},
	}
	for _, tc := range tests {
		if err := p.hsI.ConsumeResponse(tc.msg); err != tc.want {
			t.Errorf("ConsumeResponse(%s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := p.hsI.ConsumeResponse(good); err != nil {
		t.Fatalf("ConsumeResponse(good) = %v", err)
	}
	if err := p.hsI.ConsumeResponse(good); err != noise.DropUnexpectedState {
		t.Errorf("ConsumeResponse(again) = %v, want %v", err, noise.DropUnexpectedState)
	}
}

// TestBadMAC1FloodCostsNoCurve25519: initiations with a bad MAC1, through
// Check or straight into ConsumeInitiation, cost no Curve25519 operation.
func TestBadMAC1FloodCostsNoCurve25519(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	good := p.initiation(t, 1)
	st := p.idR.Stats()
	before := st.Snapshot()
	const n = 2000
	for i := range n {
		m := bytes.Clone(good)
		binary.LittleEndian.PutUint32(m[noise.InitiationOffsetMAC1:], uint32(i)+1)
		if v, err := p.idR.CookieChecker().Check(m, p.initiatorSrc, i%2 == 0); v != noise.VerdictDrop || err != noise.DropBadMAC1 {
			t.Fatalf("Check(bad mac1) = %v, %v; want drop, bad mac1", v, err)
		}
		if _, err := p.idR.ConsumeInitiation(m, p.lookupR); err != noise.DropBadMAC1 {
			t.Fatalf("ConsumeInitiation(bad mac1) = %v", err)
		}
	}
	after := st.Snapshot()
	if got := after.Curve25519 - before.Curve25519; got != 0 {
		t.Errorf("Curve25519 operations for %d bad-MAC1 initiations = %d, want 0", 2*n, got)
	}
	if got := after.Drops[noise.DropBadMAC1] - before.Drops[noise.DropBadMAC1]; got != 2*n {
		t.Errorf("Dropped(bad mac1) = %d, want %d", got, 2*n)
	}
	// The good one costs exactly one: DH(S_r, E_i); DH(S_r, S_i) is
	// precomputed (once: a second Precompute costs nothing).
	p.hsR.Precompute()
	p.hsR.Precompute()
	after = st.Snapshot()
	if _, err := p.idR.ConsumeInitiation(good, p.lookupR); err != nil {
		t.Fatal(err)
	}
	if got := st.Curve25519Operations() - after.Curve25519; got != 1 {
		t.Errorf("Curve25519 operations for a good initiation = %d, want 1", got)
	}
}

// TestStaticStaticOnFirstUse: without Precompute, the first message of a
// handshake computes DH(S_r, S_i) itself (one more Curve25519 operation),
// and only the first.
func TestStaticStaticOnFirstUse(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	st := p.idR.Stats()
	before := st.Curve25519Operations()
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 1), p.lookupR); err != nil {
		t.Fatal(err)
	}
	if got := st.Curve25519Operations() - before; got != 2 {
		t.Errorf("first initiation without Precompute: %d Curve25519 operations, want 2 (DH(S_r, E_i) and DH(S_r, S_i))", got)
	}
	p.clock.Advance(time.Second)
	before = st.Curve25519Operations()
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 2), p.lookupR); err != nil {
		t.Fatal(err)
	}
	if got := st.Curve25519Operations() - before; got != 1 {
		t.Errorf("second initiation: %d Curve25519 operations, want 1", got)
	}
}

func TestCookie(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	cc := p.idR.CookieChecker()
	src := p.initiatorSrc

	// An initiator that ignores cookie replies never gets through.
	for i := range 5 {
		m := p.initiation(t, uint32(i+1))
		if v, err := cc.Check(m, src, true); v != noise.VerdictCookie || err != noise.DropCookieRequired {
			t.Fatalf("Check(no cookie, under load) #%d = %v, %v; want cookie", i, v, err)
		}
		var reply [noise.CookieReplySize]byte
		if err := cc.CreateReply(&reply, m, src); err != nil {
			t.Fatal(err)
		}
		p.clock.Advance(time.Second)
	}

	// One that consumes the reply does.
	m := p.initiation(t, 10)
	var reply [noise.CookieReplySize]byte
	if err := cc.CreateReply(&reply, m, src); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(reply[noise.CookieReplyOffsetReceiver:]); got != 10 {
		t.Errorf("cookie reply receiver = %d, want 10 (the initiation's sender)", got)
	}
	// A reply to a MAC1 we did not send last is refused.
	p.initiation(t, 11)
	if err := p.hsI.ConsumeCookieReply(reply[:]); err != noise.DropDecryptFailed {
		t.Errorf("ConsumeCookieReply(reply to an older MAC1) = %v, want %v", err, noise.DropDecryptFailed)
	}
	m = p.initiation(t, 12)
	if err := cc.CreateReply(&reply, m, src); err != nil {
		t.Fatal(err)
	}
	tampered := reply
	tampered[noise.CookieReplyOffsetCookie] ^= 1
	if err := p.hsI.ConsumeCookieReply(tampered[:]); err != noise.DropDecryptFailed {
		t.Errorf("ConsumeCookieReply(tampered) = %v, want %v", err, noise.DropDecryptFailed)
	}
	if err := p.hsI.ConsumeCookieReply(reply[:]); err != nil {
		t.Fatalf("ConsumeCookieReply = %v", err)
	}
	m = p.initiation(t, 13)
	if v, err := cc.Check(m, src, true); v != noise.VerdictAccept {
		t.Fatalf("Check(with cookie, under load) = %v, %v; want accept", v, err)
	}
	if _, err := p.idR.ConsumeInitiation(m, p.lookupR); err != nil {
		t.Fatalf("ConsumeInitiation(with cookie) = %v", err)
	}
	// The cookie is bound to the source address and port.
	for _, other := range []string{"198.18.2.1:40001", "198.18.2.2:40000", "[2001:db8::1]:40000"} {
		if v, _ := cc.Check(m, netip.MustParseAddrPort(other), true); v != noise.VerdictCookie {
			t.Errorf("Check(with cookie, from %s) = %v, want cookie", other, v)
		}
	}

	// The initiator stops using the cookie after CookieRefreshTime - CookieLatency.
	p.clock.Advance(protocol.CookieRefreshTime - noise.CookieLatency - 5*time.Second + time.Second)
	m = p.initiation(t, 14)
	if isZeroBytes(m[noise.InitiationOffsetMAC2:]) {
		t.Errorf("MAC2 at %v after the cookie = zeros, want a MAC", protocol.CookieRefreshTime-noise.CookieLatency-4*time.Second)
	}
	p.clock.Advance(5 * time.Second)
	m = p.initiation(t, 15)
	if !isZeroBytes(m[noise.InitiationOffsetMAC2:]) {
		t.Errorf("MAC2 after %v = % x, want zeros", protocol.CookieRefreshTime-noise.CookieLatency, m[noise.InitiationOffsetMAC2:])
	}

	// Replies to a handshake response work the same way, and a cookie reply
	// with no MAC1 sent is refused.
	fresh := noise.NewHandshake(p.idI, p.idR.PublicKey(), noise.PresharedKey{})
	if err := fresh.ConsumeCookieReply(reply[:]); err != noise.DropNoMAC1Sent {
		t.Errorf("ConsumeCookieReply(before any message) = %v, want %v", err, noise.DropNoMAC1Sent)
	}
	for _, bad := range [][]byte{nil, reply[:63], append(bytes.Clone(reply[:]), 0)} {
		if err := p.hsI.ConsumeCookieReply(bad); err != noise.DropWrongSize {
			t.Errorf("ConsumeCookieReply(%d bytes) = %v, want %v", len(bad), err, noise.DropWrongSize)
		}
	}
}

// TestCookieSecretRotation: a MAC2 made with a cookie from a secret older
// than CookieRefreshTime no longer validates; a new reply uses a new secret.
func TestCookieSecretRotation(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	cc := p.idR.CookieChecker()
	m := p.initiation(t, 1)
	var reply [noise.CookieReplySize]byte
	if err := cc.CreateReply(&reply, m, p.initiatorSrc); err != nil {
		t.Fatal(err)
	}
	if err := p.hsI.ConsumeCookieReply(reply[:]); err != nil {
		t.Fatal(err)
	}
	// The responder's side: the secret, not the initiator's cookie, expires.
	m = p.initiation(t, 2)
	if !cc.CheckMAC2(m, p.initiatorSrc) {
		t.Fatal("CheckMAC2(fresh cookie) = false")
	}
	p.clock.Advance(protocol.CookieRefreshTime + time.Millisecond)
	if cc.CheckMAC2(m, p.initiatorSrc) {
		t.Errorf("CheckMAC2 after %v = true, want false (secret expired)", protocol.CookieRefreshTime)
	}
	if err := cc.CreateReply(&reply, m, p.initiatorSrc); err != nil {
		t.Fatal(err)
	}
	if cc.CheckMAC2(m, p.initiatorSrc) {
		t.Errorf("CheckMAC2 with the old cookie after rotation = true, want false")
	}
}

func isZeroBytes(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// TestSimultaneousInitiation: a responder that had its own initiation out
// abandons it for the peer's, keeps reporting its index until the response
// replaces it, and refuses a response to the abandoned one.
func TestSimultaneousInitiation(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	var mine [noise.InitiationSize]byte
	if err := p.hsR.CreateInitiation(&mine, 77); err != nil {
		t.Fatal(err)
	}
	if _, err := p.idR.ConsumeInitiation(p.initiation(t, 1), p.lookupR); err != nil {
		t.Fatal(err)
	}
	if got := p.hsR.LocalIndex(); got != 77 {
		t.Errorf("LocalIndex after consuming the peer's initiation = %d, want 77", got)
	}
	if got := p.hsR.State(); got != noise.StateInitiationConsumed {
		t.Errorf("State = %v, want %v", got, noise.StateInitiationConsumed)
	}
	var resp [noise.ResponseSize]byte
	if err := p.hsR.CreateResponse(&resp, 78); err != nil {
		t.Fatal(err)
	}
	if got := p.hsR.LocalIndex(); got != 78 {
		t.Errorf("LocalIndex after CreateResponse = %d, want 78", got)
	}
	if got := p.hsR.Clear(); got != 78 {
		t.Errorf("Clear() = %d, want 78", got)
	}
}

// TestConcurrentUse exercises the locks under the race detector: one
// identity's checker and handshakes used from several goroutines.
func TestConcurrentUse(t *testing.T) {
	p := newPair(t, noise.PresharedKey{})
	init := p.initiation(t, 1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply [noise.CookieReplySize]byte
			var m [noise.InitiationSize]byte
			for i := range 50 {
				cc := p.idR.CookieChecker()
				if v, _ := cc.Check(init, p.initiatorSrc, true); v == noise.VerdictCookie {
					if err := cc.CreateReply(&reply, init, p.initiatorSrc); err != nil {
						t.Error(err)
						return
					}
				}
				if g == 0 {
					p.hsI.ConsumeCookieReply(reply[:])
				}
				if i%10 == 0 {
					p.hsI.CreateInitiation(&m, uint32(i))
					p.clock.Advance(time.Second)
					p.idR.ConsumeInitiation(m[:], p.lookupR)
				}
				_ = p.idR.Stats().Snapshot()
			}
		}()
	}
	wg.Wait()
}
