package gateway

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// TestAdmitCookieReplyFlood: cookie replies and messages of no handshake
// type cost no Curve25519 work, so admission settles them itself and they
// take no place in the pool's queue (ARCHITECTURE.md "Threading model":
// only Curve25519 work enters it). A flood of spoofed cookie replies for
// indexes we never sent (64 bytes from any source, no MAC to forge) twice
// the queue's size leaves it empty, each counted unknown_index at once,
// and a proven initiation admitted after them is queued; a cookie reply
// for our initiation in flight is consumed at admission (the initiation
// made next carries MAC2).
func TestAdmitCookieReplyFlood(t *testing.T) {
	r := newLightRig(t, 1, 1)
	s := r.sims[0]
	r.f.load.Store(true)
	spoofed := fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("203.0.113.9:1"),
		Dst: netip.MustParseAddrPort("198.18.0.1:51820")}
	flood := 2 * cap(r.dev.pool.msgs)
	for i := range flood {
		var cr [noise.CookieReplySize]byte
		cr[0] = noise.TypeCookieReply
		binary.LittleEndian.PutUint32(cr[noise.CookieReplyOffsetReceiver:], uint32(0x9e3779b9*uint32(i+1)))
		m := spoofed
		m.Data = cr[:]
		r.dev.admit(m)
	}
	junk := spoofed
	junk.Data = []byte{9, 0, 0, 0, 1, 2, 3, 4}
	r.dev.admit(junk)
	st := r.dev.Stats()
	if n := len(r.dev.pool.msgs); n != 0 {
		t.Fatalf("%d spoofed cookie replies and a message of type 9 admitted: %d queued for the handshake workers, want 0", flood, n)
	}
	if st.Drops[DropUnknownIndex] != uint64(flood) || st.Drops[DropUnknownType] != 1 {
		t.Fatalf("drops %v; want unknown_index=%d unknown_type=1", st.Drops.List(), flood)
	}

	// A legitimate peer with a cookie still gets into the queue.
	r.dev.admit(s.message(s.initiation(t, 1)))
	cr := ofType(r.f.sentSince(0), noise.TypeCookieReply, noise.CookieReplySize)
	if len(cr) != 1 {
		t.Fatalf("unproven initiation under load: sent %v, want one cookie reply", types(r.f.sentSince(0)))
	}
	if err := s.hs.ConsumeCookieReply(cr[0].payload); err != nil {
		t.Fatal(err)
	}
	r.dev.admit(s.message(s.initiation(t, 2)))
	if n := len(r.dev.pool.msgs); n != 1 || r.dev.Stats().Drops[DropHandshakeBacklogFull] != 0 {
		t.Fatalf("proven initiation after the flood: %d queued, backlog_full %d; want 1, 0",
			n, r.dev.Stats().Drops[DropHandshakeBacklogFull])
	}
	<-r.dev.pool.msgs

	// Our own initiation in flight, answered by the peer's cookie reply:
	// consumed at admission.
	fp := r.dev.FastPeer(s.pub)
	fp.Endpoint.Store(&fastpath.Endpoint{Dst: s.src, Src: netip.MustParseAddr("198.18.0.1")})
	fp.HandshakeNeeded.Store(true)
	mark := r.f.nsent()
	r.dev.Tick(r.now())
	ini := ofType(r.f.sentSince(mark), noise.TypeInitiation, noise.InitiationSize)
	if len(ini) != 1 {
		t.Fatalf("no initiation of ours: sent %v", types(r.f.sentSince(mark)))
	}
	peerID := noise.NewStaticIdentity(s.key, r.dev.clock)
	var reply [noise.CookieReplySize]byte
	if err := peerID.CookieChecker().CreateReply(&reply, ini[0].payload, netip.MustParseAddrPort("198.18.0.1:51820")); err != nil {
		t.Fatal(err)
	}
	m := s.message(reply[:])
	before := r.dev.Stats().Noise.CookieRepliesConsumed
	r.dev.admit(m)
	if n := len(r.dev.pool.msgs); n != 0 || r.dev.Stats().Noise.CookieRepliesConsumed != before+1 {
		t.Fatalf("cookie reply to our initiation: %d queued, %d consumed; want 0 queued, consumed at admission",
			n, r.dev.Stats().Noise.CookieRepliesConsumed-before)
	}
}

// TestAdmitProvenSourceFlood: under load, one source that proved its
// address (a cookie of ours, so a valid MAC2) and replays one initiation
// twice as often as the pool's queue holds is held to its rate at
// admission (noise.SourceLimiter: burst 5), not queued to be refused by
// the same limiter later: the queue keeps its places for other proven
// sources, whose initiation admitted after the flood is queued and
// answered. Each queued message is charged once: the 5 the flood got in
// are not refused again when a handshake worker takes them.
func TestAdmitProvenSourceFlood(t *testing.T) {
	r := newLightRig(t, 2, 1)
	r.f.load.Store(true)
	cookie := func(s *simPeer, idx uint32) {
		t.Helper()
		mark := r.f.nsent()
		r.dev.admit(s.message(s.initiation(t, idx)))
		cr := ofType(r.f.sentSince(mark), noise.TypeCookieReply, noise.CookieReplySize)
		if len(cr) != 1 {
			t.Fatalf("unproven initiation under load: sent %v, want one cookie reply", types(r.f.sentSince(mark)))
		}
		if err := s.hs.ConsumeCookieReply(cr[0].payload); err != nil {
			t.Fatal(err)
		}
	}
	a, b := r.sims[0], r.sims[1]
	cookie(a, 1)
	cookie(b, 1)
	flood := a.message(a.initiation(t, 2)) // carries MAC2 for a's source
	n := 2 * cap(r.dev.pool.msgs)
	for range n {
		r.dev.admit(flood)
	}
	queued := len(r.dev.pool.msgs)
	if queued != noise.SourceBurst || r.dev.Stats().Drops[DropRateLimited] != uint64(n-noise.SourceBurst) {
		t.Fatalf("%d replays of one proven initiation from one source: %d queued, rate_limited %d; want %d queued (the source's burst), the rest rate_limited",
			n, queued, r.dev.Stats().Drops[DropRateLimited], noise.SourceBurst)
	}
	r.dev.admit(b.message(b.initiation(t, 2)))
	if got := len(r.dev.pool.msgs); got != queued+1 {
		t.Fatalf("another proven source after the flood: %d queued, want %d (backlog_full %d)",
			got, queued+1, r.dev.Stats().Drops[DropHandshakeBacklogFull])
	}
	limited := r.dev.Stats().Drops[DropRateLimited]
	for len(r.dev.pool.msgs) > 0 {
		r.dev.handleQueued(<-r.dev.pool.msgs) // as a handshake worker takes it
	}
	st := r.dev.Stats()
	if st.Drops[DropRateLimited] != limited {
		t.Errorf("queued messages refused by the limiter again: rate_limited %d → %d", limited, st.Drops[DropRateLimited])
	}
	// a's first replay gets its session, the other 4 are replays
	// (stale timestamp); b's initiation gets its own.
	if got := len(r.responses()); got != 2 {
		t.Errorf("%d responses, want 2 (one per proven source); drops %v", got, st.Losses())
	}
}

// TestSmallBacklogNotAlwaysLoaded: a pool queue of fewer than 8 places
// (Options.HandshakeBacklog) is under load from its first waiting
// message, not with none: an initiation to an idle device is answered
// with a response, not a cookie reply (whitepaper §5.3: cookies only
// under load).
func TestSmallBacklogNotAlwaysLoaded(t *testing.T) {
	our, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeDP(t)
	dev, err := New(Options{PrivateKey: our, Dataplane: f, HandshakeWorkers: 1, HandshakeBacklog: 4,
		WANAddr4: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	key, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &simPeer{key: key, pub: key.PublicKey(), src: netip.MustParseAddrPort("198.18.1.1:51820"),
		hs: noise.NewHandshake(noise.NewStaticIdentity(key, nil), our.PublicKey(), noise.PresharedKey{})}
	if err := dev.AddPeer(PeerConfig{PublicKey: s.pub}); err != nil {
		t.Fatal(err)
	}
	dev.HandleMessage(s.message(s.initiation(t, 1)))
	sent := f.sentSince(0)
	if len(ofType(sent, noise.TypeResponse, 0)) != 1 || len(sent) != 1 {
		t.Fatalf("initiation to an idle device with a backlog of 4: sent %v, want one response", types(sent))
	}
	dev.pool.msgs <- fastpath.HandshakeMessage{}
	if !dev.pool.loaded() {
		t.Errorf("backlog of 4 with a message waiting: not under load")
	}
}

// TestAdmitCookieReplyNotBehindPeerLock: admission consumes a cookie
// reply without taking its peer's lock, which a handshake worker holds
// through that peer's Curve25519 work: a stream of cookie replies naming
// a busy peer (an on-path sender sees its indexes) does not make
// admission wait behind it. The test holds the peer's lock itself.
func TestAdmitCookieReplyNotBehindPeerLock(t *testing.T) {
	r := newLightRig(t, 1, 1)
	s := r.sims[0]
	fp := r.dev.FastPeer(s.pub)
	fp.Endpoint.Store(&fastpath.Endpoint{Dst: s.src, Src: netip.MustParseAddr("198.18.0.1")})
	fp.HandshakeNeeded.Store(true)
	r.dev.Tick(r.now())
	ini := ofType(r.f.sentSince(0), noise.TypeInitiation, noise.InitiationSize)
	if len(ini) != 1 {
		t.Fatalf("no initiation of ours: sent %v", types(r.f.sentSince(0)))
	}
	var reply [noise.CookieReplySize]byte
	if err := noise.NewStaticIdentity(s.key, r.dev.clock).CookieChecker().CreateReply(&reply, ini[0].payload, s.src); err != nil {
		t.Fatal(err)
	}
	p := r.dev.byKey[s.pub]
	p.mu.Lock()
	done := make(chan struct{})
	go func() {
		r.dev.admit(s.message(reply[:]))
		close(done)
	}()
	select { // a bound for a hung test, not a timing assertion
	case <-done:
		p.mu.Unlock()
	case <-time.After(time.Minute):
		p.mu.Unlock()
		<-done
		t.Fatal("admission of a cookie reply waited for its peer's lock")
	}
	if got := r.dev.Stats().Noise.CookieRepliesConsumed; got != 1 {
		t.Errorf("cookie replies consumed = %d, want 1", got)
	}
}
