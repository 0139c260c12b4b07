package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// TestStartLoop runs the real loop: handshake messages arrive through
// Dataplane.Handshakes (not HandleMessage), timers on the ticker.
func TestStartLoop(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.f.viaChannel = true
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	r.wgSend(1)
	if _, ok := r.waitInner(waitLimit); !ok {
		t.Fatalf("no data from wireguard-go through the loop; sent %v", types(r.f.sentSince(0)))
	}
	// The ticker sees the promotion.
	fp := r.fp()
	deadline := time.Now().Add(10 * time.Second)
	for fp.Promoted.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if fp.Promoted.Load() {
		t.Errorf("Promoted still set 10 s after promotion, want the ticker to clear it")
	}
}

// newPlainDevice is a Device with a fresh key on f, closed with the test.
func newPlainDevice(t testing.TB, f *fakeDP) *Device {
	t.Helper()
	priv, _ := noise.NewPrivateKey()
	d, err := New(Options{PrivateKey: priv, Dataplane: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestAddRemovePeer(t *testing.T) {
	f := newFakeDP(t)
	d := newPlainDevice(t, f)
	k1, _ := noise.NewPrivateKey()
	k2, _ := noise.NewPrivateKey()
	p1, p2 := k1.PublicKey(), k2.PublicKey()
	a := netip.MustParsePrefix("198.19.0.0/24")
	b := netip.MustParsePrefix("198.19.1.0/24")
	if err := d.AddPeer(PeerConfig{PublicKey: p1, AllowedIPs: []netip.Prefix{a, b}, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820")}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPeer(PeerConfig{PublicKey: p2, AllowedIPs: []netip.Prefix{b}}); err != nil {
		t.Fatal(err)
	}
	// Our own key is ignored, as wireguard-go does.
	if err := d.AddPeer(PeerConfig{PublicKey: d.PublicKey()}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPeer(PeerConfig{PublicKey: p2, PersistentKeepalive: 70000 * time.Second}); err == nil {
		t.Errorf("AddPeer(keepalive 70000 s) = nil, want an error")
	}
	f.mu.Lock()
	n, allowed := len(f.peers), slices.Clone(f.allowed)
	f.mu.Unlock()
	if n != 2 {
		t.Fatalf("dataplane has %d peers, want 2", n)
	}
	if !slices.Equal(allowed[0], []netip.Prefix{a}) || !slices.Equal(allowed[1], []netip.Prefix{b}) {
		t.Errorf("allowed IPs = %v, want [[%v] [%v]] (b moved to the later peer)", allowed, a, b)
	}
	ps := d.Peers()
	if len(ps) != 2 || ps[0].Endpoint != netip.MustParseAddrPort("198.18.0.2:51820") {
		t.Errorf("Peers() = %+v, want two, the first with its endpoint", ps)
	}
	if !d.RemovePeer(p1) || d.RemovePeer(p1) {
		t.Errorf("RemovePeer twice: want true then false")
	}
	if d.FastPeer(p1) != nil || d.FastPeer(p2) == nil {
		t.Errorf("FastPeer after removal: p1 %v p2 %v, want nil and non-nil", d.FastPeer(p1), d.FastPeer(p2))
	}
}

// TestUnderLoadHoldsOneSecond: "under load" lasts UnderLoadAfterTime (1 s)
// after the dataplane's queue drained (wireguard-go, the kernel).
func TestUnderLoadHoldsOneSecond(t *testing.T) {
	r := newRig(t, rigOptions{})
	init := func() fastpath.HandshakeMessage {
		// A real initiation from a peer the device knows, MAC1 valid.
		return fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("198.18.0.2:51820"), Data: r.wgInitiation(t)}
	}
	r.f.load.Store(true)
	r.dev.HandleMessage(init())
	r.f.load.Store(false)
	for _, tc := range []struct {
		after      time.Duration
		wantCookie bool
	}{
		{500 * time.Millisecond, true},
		{time.Second, false},
	} {
		r.f.clock.Store(fakeEpoch + int64(tc.after))
		mark := r.f.nsent()
		r.dev.HandleMessage(init())
		s := r.f.sentSince(mark)
		gotCookie := len(ofType(s, noise.TypeCookieReply, 0)) == 1
		if gotCookie != tc.wantCookie || len(s) != 1 {
			t.Errorf("%v after load: sent %v, want cookie reply %v", tc.after, types(s), tc.wantCookie)
		}
	}
}

// TestResponderNextReplaced: a second initiation before any data replaces
// the responder's unconfirmed Next keypair; the first is unpublished and
// zeroed, and Current is untouched (whitepaper §5.4.5: the responder does
// not send with a session before the initiator used it).
func TestResponderNextReplaced(t *testing.T) {
	r := newRig(t, rigOptions{})
	fp := r.fp()
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: r.wgInitiation(t)})
	first := fp.Next.Load()
	if first == nil || fp.Current.Load() != nil {
		t.Fatalf("after an initiation: Next %p Current %p, want Next set, Current nil", first, fp.Current.Load())
	}
	r.f.clock.Add(int64(time.Second))
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: r.wgInitiation(t)})
	second := fp.Next.Load()
	if second == nil || second == first {
		t.Fatalf("after a second initiation Next = %p, want a new keypair (first %p)", second, first)
	}
	if !first.Dead() || r.f.idx.Lookup(first.LocalIndex) != nil {
		t.Errorf("replaced Next: Dead %v, still published %v; want zeroed and unpublished", first.Dead(), r.f.idx.Lookup(first.LocalIndex) != nil)
	}
	if fp.Current.Load() != nil || r.f.idx.Len() != 1 {
		t.Errorf("Current %p, %d indexes; want nil and 1", fp.Current.Load(), r.f.idx.Len())
	}
}

// TestSweepSparesKeypairMidPromotion: a worker promotes Next in two steps
// (Next → nil, then Current ← kp); a tick between them must not free the
// keypair.
func TestSweepSparesKeypairMidPromotion(t *testing.T) {
	r := newRig(t, rigOptions{})
	fp := r.fp()
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("198.18.0.2:51820"), Data: r.wgInitiation(t)})
	kp := fp.Next.Load()
	if kp == nil {
		t.Fatal("no Next keypair after an initiation")
	}
	if !fp.Next.CompareAndSwap(kp, nil) { // first half of a promotion
		t.Fatal("CompareAndSwap(Next) failed")
	}
	r.f.stamp(fp) // as the promoting worker's publish reports the peer
	r.advance(50 * time.Millisecond)
	if kp.Dead() || r.f.idx.Lookup(kp.LocalIndex) != kp {
		t.Fatalf("keypair mid-promotion: Dead %v, published %v; want alive and published", kp.Dead(), r.f.idx.Lookup(kp.LocalIndex) == kp)
	}
	fp.Current.Store(kp) // second half
	fp.Promoted.Store(true)
	r.advance(50 * time.Millisecond)
	r.advance(50 * time.Millisecond)
	if kp.Dead() || r.f.idx.Lookup(kp.LocalIndex) != kp {
		t.Fatalf("promoted keypair: Dead %v, published %v; want alive and published", kp.Dead(), r.f.idx.Lookup(kp.LocalIndex) == kp)
	}
	// A keypair gone from every slot for two ticks is freed.
	fp.Current.Store(nil)
	r.f.stamp(fp)
	r.advance(50 * time.Millisecond)
	r.advance(50 * time.Millisecond)
	if !kp.Dead() || r.f.idx.Lookup(kp.LocalIndex) != nil {
		t.Errorf("orphaned keypair after two ticks: Dead %v, published %v; want zeroed and freed", kp.Dead(), r.f.idx.Lookup(kp.LocalIndex) != nil)
	}
}

// TestAddPeersPublishesOnce: many peers added together reach the dataplane
// in one SetPeers (adding them one by one rebuilt its tables per peer:
// startup quadratic in peers), and a bad configuration among them changes
// nothing.
func TestAddPeersPublishesOnce(t *testing.T) {
	f := newFakeDP(t)
	d := newPlainDevice(t, f)
	cs := make([]PeerConfig, 500)
	for i := range cs {
		k, _ := noise.NewPrivateKey()
		cs[i] = PeerConfig{PublicKey: k.PublicKey(),
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i / 250), byte(i % 250)}), 32)}}
	}
	bad := append(append([]PeerConfig(nil), cs[:3]...), PeerConfig{PublicKey: cs[3].PublicKey, PersistentKeepalive: -time.Second})
	f.mu.Lock()
	before := f.setPeers
	f.mu.Unlock()
	if err := d.AddPeers(bad); err == nil {
		t.Fatal("AddPeers with a negative keepalive = nil, want an error")
	}
	if n := len(d.Peers()); n != 0 {
		t.Fatalf("%d peers after a refused AddPeers, want 0", n)
	}
	if err := d.AddPeers(cs); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	calls, got := f.setPeers-before, len(f.peers)
	f.mu.Unlock()
	if calls != 1 || got != len(cs) {
		t.Errorf("AddPeers(%d) made %d SetPeers calls with %d peers, want 1 with %d", len(cs), calls, got, len(cs))
	}
	if n := len(d.Peers()); n != len(cs) {
		t.Errorf("Peers() lists %d, want %d", n, len(cs))
	}
}

func TestStatsLosses(t *testing.T) {
	var s Stats
	s.Drops[DropUnknownType] = 2
	s.Drops[DropHandshakeInvalid] = 3
	s.Noise.Drops[noise.DropWrongSize] = 1
	s.Noise.Drops[noise.DropBadMAC1] = 2
	// Not handshake_invalid: answered with cookie replies (or dropped as
	// cookie_budget), and counted as unknown_peer.
	s.Noise.Drops[noise.DropCookieRequired] = 19941
	s.Drops[DropCookieBudget] = 2027
	s.Noise.Drops[noise.DropUnknownPeer] = 4
	s.Drops[DropUnknownPeer] = 4
	got := strings.Join(s.Losses(), " ")
	if want := "cookie_budget=2027 handshake_invalid=3 (bad_mac1=2 wrong_size=1) unknown_peer=4 unknown_type=2"; got != want {
		t.Errorf("Losses = %q, want %q", got, want)
	}
}

// TestKeypairsRetiredThroughDataplane: every way a session ends hands its
// keypairs to Dataplane.Retire (which erases their keys after the workers'
// grace period), and Tick and Close reap.
func TestKeypairsRetiredThroughDataplane(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	kp := r.establishAsInitiator()
	if r.f.wasRetired(kp) {
		t.Fatal("a live keypair was retired")
	}
	before := r.f.reaps.Load()
	r.dev.Tick(r.now())
	if r.f.reaps.Load() == before {
		t.Error("Tick did not call Dataplane.Reap")
	}
	// Peer removal.
	if !r.dev.RemovePeer(r.wgPub) {
		t.Fatal("RemovePeer: peer not found")
	}
	if !r.f.wasRetired(kp) || !kp.Dead() {
		t.Fatalf("after RemovePeer: retired %v, dead %v; want both", r.f.wasRetired(kp), kp.Dead())
	}
}

// TestCloseRetiresKeypairs: Device.Close retires every keypair and reaps.
func TestCloseRetiresKeypairs(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	kp := r.establishAsInitiator()
	before := r.f.reaps.Load()
	if err := r.dev.Close(); err != nil {
		t.Fatal(err)
	}
	if !r.f.wasRetired(kp) || !kp.Dead() {
		t.Fatalf("after Close: retired %v, dead %v; want both", r.f.wasRetired(kp), kp.Dead())
	}
	if r.f.reaps.Load() == before {
		t.Error("Close did not call Dataplane.Reap")
	}
}

// TestSessionResetRetiresKeypairs: the sessions a new private key stops
// sending on (they go on receiving: TestKeyChangeKeepsReceiving) end
// through Dataplane.Retire when they expire.
func TestSessionResetRetiresKeypairs(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	kp := r.establishAsInitiator()
	k, _ := noise.NewPrivateKey()
	r.dev.SetPrivateKey(k)
	if r.f.wasRetired(kp) || kp.Dead() {
		t.Fatalf("after SetPrivateKey: retired %v, dead %v; want neither before it expires", r.f.wasRetired(kp), kp.Dead())
	}
	r.advance(protocol.RejectAfterTime)
	r.advance(time.Millisecond)
	if !r.f.wasRetired(kp) || !kp.Dead() {
		t.Fatalf("after SetPrivateKey and Reject-After-Time: retired %v, dead %v; want both", r.f.wasRetired(kp), kp.Dead())
	}
}

// TestBadMAC1Warns: a handshake whose MAC1 is not for this gateway's
// public key (a peer configured with another key) is dropped and counted,
// and logged at warning level at most once a minute, with its source.
func TestBadMAC1Warns(t *testing.T) {
	r := newRig(t, rigOptions{})
	var logs bytes.Buffer
	r.dev.log = slog.New(slog.NewTextHandler(&logs, nil))
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	bad := func() {
		m := r.wgInitiation(t)
		m[noise.InitiationOffsetMAC1] ^= 1
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: m})
	}
	bad()
	bad()
	if n := strings.Count(logs.String(), "bad MAC1"); n != 1 {
		t.Fatalf("two bad MAC1s within a minute logged %d times, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "src=198.18.0.2:51820") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warning lacks the source or level:\n%s", logs.String())
	}
	r.f.clock.Add(int64(61 * time.Second))
	bad()
	if n := strings.Count(logs.String(), "bad MAC1"); n != 2 {
		t.Errorf("a bad MAC1 a minute later: logged %d times in all, want 2", n)
	}
	if got := r.dev.Stats().Drops[DropHandshakeInvalid]; got != 3 {
		t.Errorf("handshake_invalid = %d, want 3", got)
	}
	// A valid initiation logs nothing more.
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: r.wgInitiation(t)})
	if n := strings.Count(logs.String(), "bad MAC1"); n != 2 {
		t.Errorf("a valid initiation was logged as a bad MAC1")
	}
}

// TestUnknownPeerWarns: an initiation from a key that is no peer's (here
// a peer removed, as after a key rotation, whose device still tries) is
// dropped and counted as unknown_peer, and logged at warning level at
// most once a minute with the key and the source, so that the operator
// of a concentrator can tell which device it is. Before, only the counter
// grew.
func TestUnknownPeerWarns(t *testing.T) {
	r := newRig(t, rigOptions{})
	var logs bytes.Buffer
	r.dev.log = slog.New(slog.NewTextHandler(&logs, nil))
	if !r.dev.RemovePeer(r.wgPub) {
		t.Fatal("RemovePeer: no such peer")
	}
	src := netip.MustParseAddrPort("198.18.0.2:40001")
	const msg = "public key that is no peer of this gateway"
	try := func() {
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: r.wgInitiation(t)})
	}
	try()
	try()
	if n := strings.Count(logs.String(), msg); n != 1 {
		t.Fatalf("two initiations from an unknown key within a minute logged %d times, want 1:\n%s", n, logs.String())
	}
	for _, want := range []string{"level=WARN", `public_key="` + r.wgPub.Base64() + `"`, "src=198.18.0.2:40001"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("warning lacks %q:\n%s", want, logs.String())
		}
	}
	r.f.clock.Add(int64(61 * time.Second))
	try()
	if n := strings.Count(logs.String(), msg); n != 2 {
		t.Errorf("an unknown key a minute later: logged %d times in all, want 2", n)
	}
	if got := r.dev.Stats().Drops[DropUnknownPeer]; got != 3 {
		t.Errorf("unknown_peer = %d, want 3", got)
	}
}

// TestStartErrorSticks: a Start that failed (the UAPI socket could not be
// made) started nothing, and a second Start must say so again rather than
// return nil with nothing running.
func TestStartErrorSticks(t *testing.T) {
	// Another WireGuard answers on the name's socket (or, without root,
	// the directory is not ours): Start cannot make it.
	name := uniqueName("wgse")
	if os.MkdirAll("/var/run/wireguard", 0o755) == nil {
		if l, err := net.Listen("unix", "/var/run/wireguard/"+name+".sock"); err == nil {
			t.Cleanup(func() { l.Close() })
		}
	}
	d, err := New(Options{Name: name, Dataplane: newFakeDP(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	err1 := d.Start()
	if err1 == nil {
		t.Fatal("Start with the UAPI socket's name taken = nil, want an error")
	}
	if err2 := d.Start(); err2 != err1 {
		t.Errorf("second Start = %v, want the first one's error %v", err2, err1)
	}
}

// TestAddPeerKeepaliveWholeSeconds: PersistentKeepalive is whole seconds
// (the UAPI's persistent_keepalive_interval); AddPeer refuses a fraction,
// which would otherwise be truncated (500 ms to 0, keepalive off) without
// a word, and changes nothing.
func TestAddPeerKeepaliveWholeSeconds(t *testing.T) {
	d := newPlainDevice(t, newFakeDP(t))
	k, _ := noise.NewPrivateKey()
	for _, ka := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, -time.Second, 65536 * time.Second} {
		if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey(), PersistentKeepalive: ka}); err == nil {
			t.Errorf("AddPeer(PersistentKeepalive %v) = nil, want an error", ka)
		}
	}
	if n := len(d.Peers()); n != 0 {
		t.Errorf("after refused AddPeers, %d peers, want 0", n)
	}
	if err := d.AddPeer(PeerConfig{PublicKey: k.PublicKey(), PersistentKeepalive: 25 * time.Second}); err != nil {
		t.Fatalf("AddPeer(PersistentKeepalive 25s) = %v", err)
	}
	if got := d.Peers()[0].PersistentKeepalive; got != 25*time.Second {
		t.Errorf("PersistentKeepalive = %v, want 25s", got)
	}
}

// TestClosedDeviceRefusesChanges: after Close, which zeroed every key the
// device held, the configuration calls change nothing and say so: a peer
// (with its preshared key) or a private key set afterwards would be key
// material no one erases, and a UAPI set would report success for a
// device that is gone.
func TestClosedDeviceRefusesChanges(t *testing.T) {
	r := newRig(t, rigOptions{})
	if err := r.dev.Close(); err != nil {
		t.Fatal(err)
	}
	k, _ := noise.NewPrivateKey()
	pub := k.PublicKey()
	psk := noise.PresharedKey{1}
	err := r.dev.AddPeer(PeerConfig{PublicKey: pub, PresharedKey: psk})
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("AddPeer after Close: %v, want an error wrapping net.ErrClosed", err)
	}
	if n := len(r.dev.Peers()); n != 0 {
		t.Errorf("after AddPeer on a closed device: %d peers, want 0", n)
	}
	err = r.dev.IpcSet(strings.NewReader("public_key=" + pub.Hex() + "\n\n"))
	var ue *UAPIError
	if !errors.As(err, &ue) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("IpcSet after Close: %v, want a *UAPIError wrapping net.ErrClosed", err)
	}
	if n := len(r.dev.Peers()); n != 0 {
		t.Errorf("after IpcSet on a closed device: %d peers, want 0", n)
	}
	r.dev.SetPrivateKey(k)
	if pk := r.dev.PublicKey(); pk != (noise.PublicKey{}) {
		t.Errorf("after SetPrivateKey on a closed device: public key %x, want none", pk)
	}
}

// TestUnclampedKeyResetNot: a private key given unclamped (a file's
// PrivateKey from a tool other than wg genkey; wg(8) takes any 32
// bytes), set again unchanged through the UAPI (a SIGHUP reload, wg
// syncconf), keeps every session, as in wireguard-go, which clamps the key
// before it compares it. The device kept the key as given and compared
// it with the UAPI's clamped copy: they differed, and every session was
// dropped at the first reload.
func TestUnclampedKeyResetNot(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", unclamped: true})
	unclamped := r.ourKey
	unclamped[0] |= 7
	unclamped[31] |= 128
	kp := r.establishAsInitiator()
	if err := r.dev.IpcSet(strings.NewReader("private_key=" + unclamped.Hex() + "\n")); err != nil {
		t.Fatal(err)
	}
	if got := r.fp().Current.Load(); got != kp {
		t.Errorf("current keypair after setting the same key again = %p, want %p (kept)", got, kp)
	}
}

// TestPeerStates: PeerStates reports what Peers does of each peer's state,
// in the same order, and allocates nothing into a slice with room.
func TestPeerStates(t *testing.T) {
	f := newFakeDP(t)
	d := newPlainDevice(t, f)
	var cs []PeerConfig
	for i := range 5 {
		k, _ := noise.NewPrivateKey()
		c := PeerConfig{PublicKey: k.PublicKey(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32)}}
		if i%2 == 0 {
			c.Endpoint = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, 0, byte(i)}), 51820)
		}
		cs = append(cs, c)
	}
	if err := d.AddPeers(cs); err != nil {
		t.Fatal(err)
	}
	var want []PeerState
	for _, p := range d.Peers() {
		want = append(want, PeerState{PublicKey: p.PublicKey, Endpoint: p.Endpoint, LastHandshake: p.LastHandshake, TxBytes: p.TxBytes, RxBytes: p.RxBytes})
	}
	got := d.PeerStates(nil)
	if !slices.Equal(want, got) {
		t.Errorf("PeerStates = %+v, want %+v (Peers' state)", got, want)
	}
	buf := make([]PeerState, 0, len(cs))
	if n := testing.AllocsPerRun(100, func() { buf = d.PeerStates(buf[:0]) }); n != 0 {
		t.Errorf("PeerStates into a slice with room: %v allocations, want 0", n)
	}
}

// TestUAPIWarnsBounded: refused UAPI requests are logged ten a minute at
// most, and the first line after says how many were not; a local client
// in a loop wrote one each, without bound.
func TestUAPIWarnsBounded(t *testing.T) {
	r := newRig(t, rigOptions{})
	var logs bytes.Buffer
	r.dev.log = slog.New(slog.NewTextHandler(&logs, nil))
	refused := errors.New("set request ends without a newline")
	for range 25 {
		r.dev.warnUAPI(refused)
	}
	if n := strings.Count(logs.String(), "msg=uapi"); n != uapiWarnBurst {
		t.Fatalf("25 refusals within a minute logged %d times, want %d", n, uapiWarnBurst)
	}
	r.f.clock.Add(int64(61 * time.Second))
	r.dev.warnUAPI(refused)
	if !strings.Contains(logs.String(), "not_logged_before=15") {
		t.Errorf("the line a minute later does not count the 15 not logged:\n%s", logs.String())
	}
	// Over the socket: an unknown operation, an operation line too long,
	// an endpoint of another interface's zone (each logged a line of its
	// own, without bound; the last one two).
	for _, req := range []string{"bogus=1\n\n", strings.Repeat("a", 70<<10) + "\n",
		"set=1\npublic_key=" + strings.Repeat("ab", 32) + "\nendpoint=[fe80::1%eth9]:1\n\n"} {
		r.f.clock.Add(int64(61 * time.Second))
		logs.Reset()
		for range 25 {
			c := serve(t, r.dev)
			go io.WriteString(c, req)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c) // the reply, if any: up to its blank line
			for l, err := br.ReadString('\n'); err == nil && l != "\n"; l, err = br.ReadString('\n') {
			}
			c.Close()
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != uapiWarnBurst {
			t.Errorf("25 requests %.20q... within a minute logged %d times, want %d:\n%.2000s", req, n, uapiWarnBurst, logs.String())
		}
	}
}

// TestStartAfterClose: Start on a closed device starts nothing and says
// so (net.ErrClosed), whether Close came first or runs at the same time.
// It served the UAPI socket of the closed device, with its accept loop
// and the listener's descriptors left for good: the socket answered for a
// device that is gone, and a new device of the name could not take it.
func TestStartAfterClose(t *testing.T) {
	if os.MkdirAll("/var/run/wireguard", 0o755) != nil {
		t.Skip("no /var/run/wireguard")
	}
	name := uniqueName("wgsc")
	sock := "/var/run/wireguard/" + name + ".sock"
	t.Cleanup(func() { os.Remove(sock) })
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	dp := newFakeDP(t)
	fd0 := fds()
	d, err := New(Options{Name: name, Dataplane: dp})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := d.Start(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Start after Close = %v, want net.ErrClosed", err)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("Start after Close made %s", sock)
	}
	if n := fds(); n > fd0 {
		t.Errorf("Start after Close left %d descriptors open", n-fd0)
	}
	// Start and Close at once: either Start ran first and Close stops
	// it, or Start finds the device closed; nothing is left either way,
	// and the name is free for the next device.
	for range 20 {
		d, err := New(Options{Name: name, Dataplane: dp, HandshakeWorkers: 2})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- d.Start() }()
		d.Close()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Start racing Close = %v", err)
		}
	}
	n := fds()
	if n > fd0 {
		t.Errorf("Start racing Close left %d descriptors open", n-fd0)
	}
	d, err = New(Options{Name: name, Dataplane: dp})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		t.Errorf("a new device of the name: Start = %v", err)
	}
}
