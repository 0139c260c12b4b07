package gateway

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// simPeer is a simulated initiator built on package noise: its own static
// key and handshake toward the device.
type simPeer struct {
	key noise.PrivateKey
	pub noise.PublicKey
	hs  *noise.Handshake
	src netip.AddrPort
}

// initiation makes a fresh initiation with sender index idx (each newer
// than the last: noise bumps the TAI64N timestamp).
func (s *simPeer) initiation(t testing.TB, idx uint32) []byte {
	var msg [noise.InitiationSize]byte
	if err := s.hs.CreateInitiation(&msg, idx); err != nil {
		t.Fatal(err)
	}
	return msg[:]
}

func (s *simPeer) message(data []byte) fastpath.HandshakeMessage {
	return fastpath.HandshakeMessage{Src: s.src, Dst: netip.MustParseAddrPort("198.18.0.1:51820"),
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 2}, Data: data}
}

// lightRig is a Device over a fakeDP without a wireguard-go peer, with n
// simulated peers configured.
type lightRig struct {
	f    *fakeDP
	dev  *Device
	sims []*simPeer
	our  noise.PrivateKey
}

func newLightRig(t testing.TB, n, workers int) *lightRig {
	t.Helper()
	our, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &lightRig{f: newFakeDP(t), our: our}
	r.dev, err = New(Options{PrivateKey: our, Dataplane: r.f, HandshakeWorkers: workers,
		WANAddr4: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dev.Close() })
	cs := make([]PeerConfig, n)
	for i := range n {
		s := &simPeer{src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(1 + i>>8), byte(i)}), 51820)}
		if s.key, err = noise.NewPrivateKey(); err != nil {
			t.Fatal(err)
		}
		s.pub = s.key.PublicKey()
		s.hs = noise.NewHandshake(noise.NewStaticIdentity(s.key, nil), our.PublicKey(), noise.PresharedKey{})
		r.sims = append(r.sims, s)
		cs[i] = PeerConfig{PublicKey: s.pub, AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)}}
	}
	if err := r.dev.AddPeers(cs); err != nil {
		t.Fatal(err)
	}
	return r
}

// responses returns the handshake responses sent so far.
func (r *lightRig) responses() []sentPacket { return ofType(r.f.sentSince(0), noise.TypeResponse, 0) }

// parallel runs fns at once (released together) and waits for them.
func parallel(fns []func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn()
		}()
	}
	close(start)
	wg.Wait()
}

// TestConcurrentInitiationsOnePeer: many initiations from one peer, and
// copies of each, processed at once by concurrent callers give exactly one
// session (whitepaper §5.4.2: one accepted initiation per timestamp, and
// none within 20 ms of the last), and the timestamp rule holds afterwards:
// a replay of the accepted initiation or of an older one gives nothing.
func TestConcurrentInitiationsOnePeer(t *testing.T) {
	r := newLightRig(t, 1, 2)
	s := r.sims[0]
	const kinds, copies = 8, 4
	msgs := make([][]byte, kinds)
	for i := range msgs {
		msgs[i] = s.initiation(t, uint32(100+i))
	}
	var fns []func()
	for _, m := range msgs {
		for range copies {
			fns = append(fns, func() { r.dev.HandleMessage(s.message(m)) })
		}
	}
	parallel(fns)
	resp := r.responses()
	if len(resp) != 1 || r.dev.Stats().KeypairsInstalledTotal != 1 {
		t.Fatalf("%d responses, %d keypairs from %d concurrent initiations; want exactly 1 session",
			len(resp), r.dev.Stats().KeypairsInstalledTotal, kinds*copies)
	}
	accepted := int(binary.LittleEndian.Uint32(resp[0].payload[noise.ResponseOffsetReceiver:])) - 100
	if accepted < 0 || accepted >= kinds {
		t.Fatalf("response to sender index %d, not one of ours", accepted+100)
	}
	fp := r.dev.FastPeer(s.pub)
	if kp := fp.Next.Load(); kp == nil || r.f.idx.Lookup(kp.LocalIndex) != kp || r.f.idx.Len() != 1 {
		t.Fatalf("index table: %d entries, Next %v; want the one session's keypair published", r.f.idx.Len(), kp)
	}

	// Past the flood window, the accepted initiation and every older one
	// are replays (whitepaper §5.4.2: the timestamp must be newer).
	r.f.clock.Add(int64(time.Second))
	fns = fns[:0]
	for i := 0; i <= accepted; i++ {
		for range copies {
			fns = append(fns, func() { r.dev.HandleMessage(s.message(msgs[i])) })
		}
	}
	parallel(fns)
	if n := len(r.responses()); n != 1 {
		t.Fatalf("replays of the accepted or older initiations answered: %d responses, want 1", n)
	}
	if got := r.dev.Stats().Noise.Drops[noise.DropStaleTimestamp]; got < uint64(copies) {
		t.Errorf("stale-timestamp drops = %d, want at least %d", got, copies)
	}
	// A newer initiation still gets its session.
	r.dev.HandleMessage(s.message(s.initiation(t, 200)))
	if n := len(r.responses()); n != 2 {
		t.Errorf("fresh initiation after the replays: %d responses in all, want 2", n)
	}
}

// TestRemovePeerDuringHandshake: a peer removed while its initiation is
// being processed, or while an initiation of ours waits in the pool, leaves
// nothing behind: no receiver index, no keypair in its slots.
func TestRemovePeerDuringHandshake(t *testing.T) {
	r := newLightRig(t, 1, 2)
	s := r.sims[0]
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	iters := 40
	if testing.Short() {
		iters = 15
	}
	for i := range iters {
		fp := r.dev.FastPeer(s.pub)
		msg := s.initiation(t, uint32(i+1))
		r.f.clock.Add(int64(time.Second)) // past the flood window
		parallel([]func(){
			func() { r.dev.HandleMessage(s.message(msg)) },
			func() {
				// An initiation of ours, queued for the pool.
				fp.HandshakeNeeded.Store(true)
				r.dev.Tick(r.now())
			},
			func() { r.dev.RemovePeer(s.pub) },
		})
		// The pool may still hold our initiation: it must see the removal.
		deadline := time.Now().Add(10 * time.Second)
		for r.dev.pool.backlog() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Millisecond)
		if n := r.f.idx.Len(); n != 0 {
			t.Fatalf("iteration %d: %d receiver indexes left after the removal, want 0", i, n)
		}
		if fp.Current.Load() != nil || fp.Previous.Load() != nil || fp.Next.Load() != nil {
			t.Fatalf("iteration %d: keypairs left in the removed peer's slots", i)
		}
		if err := r.dev.AddPeer(PeerConfig{PublicKey: s.pub, Endpoint: s.src}); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *lightRig) now() int64 { return r.f.clock.Load() }

// TestUAPIDuringStorm: UAPI sets and gets while the handshake pool answers
// a storm of initiations: no race, no deadlock, the index table consistent
// (empty once the device is closed), and the configuration as set.
func TestUAPIDuringStorm(t *testing.T) {
	n, msgs := 32, 300
	if testing.Short() {
		n, msgs = 16, 120
	}
	r := newLightRig(t, n, 2)
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var uapiOps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the UAPI client
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s := r.sims[i%n]
			var req string
			switch {
			case i == 40:
				// A private key change in the storm (every session ends;
				// the old identity is zeroed once no worker uses it) and
				// back, so that the peers' initiations are valid again.
				other, _ := noise.NewPrivateKey()
				req = fmt.Sprintf("private_key=%s\n", other.Hex())
			case i == 41:
				req = fmt.Sprintf("private_key=%s\n", r.our.Hex())
			}
			switch i % 4 {
			case 0:
				req += fmt.Sprintf("public_key=%s\nremove=true\n", s.pub.Hex())
			case 1:
				req += fmt.Sprintf("public_key=%s\nendpoint=%s\nallowed_ip=198.19.%d.%d/32\n", s.pub.Hex(), s.src, i%n>>8, i%n)
			case 2:
				req += fmt.Sprintf("public_key=%s\npersistent_keepalive_interval=%d\n", s.pub.Hex(), 1+i%25)
			case 3:
				req += fmt.Sprintf("public_key=%s\nreplace_allowed_ips=true\nallowed_ip=198.19.%d.%d/32\n", s.pub.Hex(), i%n>>8, i%n)
			}
			if err := r.dev.IpcSet(strings.NewReader(req)); err != nil {
				t.Errorf("IpcSet: %v", err)
				return
			}
			var b bytes.Buffer
			if err := r.dev.IpcGet(&b); err != nil {
				t.Errorf("IpcGet: %v", err)
				return
			}
			r.dev.Stats()
			uapiOps.Add(1)
		}
	}()
	wg.Add(1)
	go func() { // the clock and the timers
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				r.f.clock.Add(int64(30 * time.Millisecond))
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range msgs {
		s := r.sims[rng.IntN(n)]
		r.f.hs <- s.message(s.initiation(t, uint32(i+1)))
	}
	// The messages are admitted into the pool's backlog at once; its
	// workers take longer, the more so on a loaded machine: the storm
	// ends when they have worked through it, not when the dataplane's
	// channel is empty (which left 294 of 300 unprocessed under load).
	for deadline := time.Now().Add(30 * time.Second); len(r.f.hs) > 0 || r.dev.Stats().HandshakeBacklog > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("handshake backlog not worked through in 30 s: %+v", r.dev.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(r.responses()) == 0 || uapiOps.Load() == 0 {
		t.Fatalf("%d responses, %d UAPI rounds: the storm or the UAPI did not run", len(r.responses()), uapiOps.Load())
	}
	// Each configured peer has its allowed IP exactly once.
	for _, ps := range r.dev.Peers() {
		if len(ps.AllowedIPs) > 1 {
			t.Errorf("peer %s: allowed IPs %v, want at most one", ps.PublicKey, ps.AllowedIPs)
		}
	}
	r.dev.Close()
	if got := r.f.idx.Len(); got != 0 {
		t.Errorf("index table after Close: %d entries, want 0", got)
	}
	t.Logf("%d initiations, %d responses, %d UAPI rounds", msgs, len(r.responses()), uapiOps.Load())
}

// TestNoGoroutineLeft: once Close returns, none of the device's goroutines
// (handshake workers, tick loop, UAPI) is left.
func TestNoGoroutineLeft(t *testing.T) {
	r := newLightRig(t, 4, 3)
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	for i, s := range r.sims {
		r.f.hs <- s.message(s.initiation(t, uint32(i+1)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(r.responses()) < len(r.sims) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(r.responses()) != len(r.sims) {
		t.Fatalf("%d responses, want %d", len(r.responses()), len(r.sims))
	}
	r.dev.Close()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "wgpio/gateway.(*Device)") && !strings.Contains(g, "TestNoGoroutineLeft") {
			t.Errorf("goroutine left after Close:\n%s", g)
		}
	}
}

// TestTickWorkFollowsDueTimers: the tick evaluates the peers stamped since
// the last one and those whose deadline came, not every peer.
func TestTickWorkFollowsDueTimers(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	r := newLightRig(t, n, 1)
	r.dev.Tick(r.now())
	base := r.dev.TickStats().Evaluated
	for range 10 {
		r.f.clock.Add(int64(DefaultTickInterval))
		r.dev.Tick(r.now())
	}
	if got := r.dev.TickStats().Evaluated - base; got != 0 {
		t.Fatalf("ten ticks over %d idle peers evaluated %d peers, want 0", n, got)
	}
	// Three peers stamped by the workers: three evaluations.
	for _, s := range r.sims[:3] {
		fp := r.dev.FastPeer(s.pub)
		storeMax(&fp.Stamps.LastReceived, r.now())
		r.f.stamp(fp)
	}
	r.f.clock.Add(int64(DefaultTickInterval))
	r.dev.Tick(r.now())
	if got := r.dev.TickStats().Evaluated - base; got != 3 {
		t.Fatalf("tick after 3 stamped peers evaluated %d, want 3", got)
	}
	// Persistent keepalive (25 s) on 20 peers without a session: the
	// keepalive falls due 25 s after it was set and starts a handshake,
	// whose retries then fall due every RekeyTimeout plus jitter. Over 50 s
	// the timers evaluate those 20 peers a few times each, where a walk of
	// every peer every tick would make n × 500 evaluations.
	var cs []PeerConfig
	for _, s := range r.sims[10:30] {
		cs = append(cs, PeerConfig{PublicKey: s.pub, Endpoint: s.src, PersistentKeepalive: 25 * time.Second})
	}
	if err := r.dev.AddPeers(cs); err != nil {
		t.Fatal(err)
	}
	base = r.dev.TickStats().Evaluated
	mark := r.f.nsent()
	for i := range 500 {
		r.f.clock.Add(int64(2 * DefaultTickInterval))
		r.dev.Tick(r.now())
		if i == 240 {
			if got := r.dev.TickStats().Evaluated - base; got != 20 {
				t.Fatalf("before the keepalives fall due: %d evaluations, want the 20 when set", got)
			}
		}
	}
	got := r.dev.TickStats().Evaluated - base
	inits := len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0))
	if got < 20*5 || got > 20*15 {
		t.Errorf("500 ticks with 20 peers keeping alive and retrying: %d evaluations, want %d..%d", got, 20*5, 20*15)
	}
	if inits < 20*5 || inits > 20*6 {
		t.Errorf("initiations from 20 peers between 25 s and 50 s (a retry every 5 s + jitter) = %d, want %d..%d", inits, 20*5, 20*6)
	}
	if s := r.dev.TickStats().Scheduled; s != 20 {
		t.Errorf("peers in the timer heap = %d, want the 20 with timers", s)
	}
}

// TestUnderLoadFromPoolBacklog: "under load" (whitepaper §5.3) follows the
// handshake pool's queue: with an eighth of it waiting, an initiation
// without MAC2 gets a cookie reply instead of a response.
func TestUnderLoadFromPoolBacklog(t *testing.T) {
	r := newLightRig(t, 2, 1)
	s := r.sims[0]
	for range cap(r.dev.pool.msgs) / 8 {
		r.dev.pool.msgs <- fastpath.HandshakeMessage{}
	}
	r.dev.HandleMessage(s.message(s.initiation(t, 1)))
	sent := r.f.sentSince(0)
	if len(ofType(sent, noise.TypeCookieReply, 0)) != 1 || len(ofType(sent, noise.TypeResponse, 0)) != 0 {
		t.Fatalf("with the pool's queue an eighth full: sent %v, want one cookie reply", types(sent))
	}
	if st := r.dev.Stats(); st.HandshakeBacklog != uint64(cap(r.dev.pool.msgs)/8) {
		t.Errorf("Stats.HandshakeBacklog = %d, want %d", st.HandshakeBacklog, cap(r.dev.pool.msgs)/8)
	}
	for len(r.dev.pool.msgs) > 0 {
		<-r.dev.pool.msgs
	}
	// Past the 1 s hold-over a fresh initiation is answered.
	r.f.clock.Add(int64(2 * time.Second))
	r.dev.HandleMessage(s.message(s.initiation(t, 2)))
	if n := len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)); n != 1 {
		t.Errorf("with the queue empty again: %d responses, want 1", n)
	}
}

// TestStaleHandshakeDropped: a message that waited in the pool's queue
// longer than REKEY_TIMEOUT is dropped unanswered (its sender has retried).
func TestStaleHandshakeDropped(t *testing.T) {
	r := newLightRig(t, 2, 1)
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	s := r.sims[0]
	old := s.message(s.initiation(t, 1))
	old.Received = r.now() - int64(6*time.Second)
	r.f.hs <- old
	fresh := s.message(s.initiation(t, 2))
	fresh.Received = r.now()
	r.f.hs <- fresh
	deadline := time.Now().Add(10 * time.Second)
	for len(r.responses()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(r.responses()); n != 1 {
		t.Fatalf("%d responses, want 1 (to the fresh initiation)", n)
	}
	if got := r.dev.Stats().Drops[DropHandshakeStale]; got != 1 {
		t.Errorf("Drops[handshake stale] = %d, want 1", got)
	}
	if got := binary.LittleEndian.Uint32(r.responses()[0].payload[noise.ResponseOffsetReceiver:]); got != 2 {
		t.Errorf("response to sender index %d, want 2 (the fresh one)", got)
	}
}
