package gateway

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// The timer tests run our Device on the fake clock against stock
// wireguard-go and assert on what goes out through Dataplane.Send; the
// constants are whitepaper §6.1's (wireguard-go device/constants.go).

// ofType returns the packets of type typ (and size, if not 0).
func ofType(s []sentPacket, typ byte, size int) []sentPacket {
	var out []sentPacket
	for _, p := range s {
		if p.typ == typ && (size == 0 || p.size == size) {
			out = append(out, p)
		}
	}
	return out
}

func secs(d int64) float64 { return float64(d) / 1e9 }

func TestRekeyUnderTraffic(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	fp := r.fp()
	first := r.establishAsInitiator()
	t0 := first.Created
	mark := r.f.nsent()
	lost := 0
	for i := 1; i <= 130; i++ {
		r.advance(time.Second)
		if !r.f.sendData(fp, ourPacket(i)) {
			lost++
		} else if _, ok := r.waitWG(waitLimit); !ok {
			lost++
		}
		r.wgSend(i)
		if _, ok := r.waitInner(waitLimit); !ok {
			lost++
		}
	}
	if lost != 0 {
		t.Errorf("%d packets lost across the rekey, want 0", lost)
	}
	inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, noise.InitiationSize)
	if len(inits) != 1 {
		t.Fatalf("initiations during 130 s of traffic = %d, want 1; sent %v", len(inits), types(r.f.sentSince(mark)))
	}
	// Rekey is checked on send: the first send at or after 120 s is at
	// t0+120 s, seen by the next tick, one second later.
	if at := inits[0].at - t0; at < int64(protocol.RekeyAfterTime) || at > int64(protocol.RekeyAfterTime+time.Second) {
		t.Errorf("rekey initiation at t0+%.3fs, want within [120 s, 121 s]", secs(at))
	}
	cur := fp.Current.Load()
	if cur == first || cur == nil || !cur.IsInitiator {
		t.Fatalf("Current after rekey = %p, want a new initiator keypair (old %p)", cur, first)
	}
	if prev := fp.Previous.Load(); prev != first {
		t.Errorf("Previous after rekey = %p, want the old keypair %p", prev, first)
	}
}

func TestRejectAfterTime(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	fp := r.fp()
	kp := r.establishAsInitiator()
	t0 := kp.Created
	r.advance(time.Duration(t0 + int64(protocol.RejectAfterTime) - time.Second.Nanoseconds() - r.now()))
	if fp.Current.Load() != kp || r.f.idx.Lookup(kp.LocalIndex) != kp {
		t.Fatalf("at t0+179 s the keypair is gone, want it current and published")
	}
	mark := r.f.nsent()
	r.advance(time.Second)
	if got := fp.Current.Load(); got != nil {
		t.Errorf("at t0+180 s Current = %p, want nil", got)
	}
	if r.f.idx.Lookup(kp.LocalIndex) != nil || r.f.idx.Len() != 0 {
		t.Errorf("at t0+180 s index %#x still published (table holds %d), want none", kp.LocalIndex, r.f.idx.Len())
	}
	if !kp.Dead() {
		t.Errorf("rejected keypair Dead() = false, want true (zeroed)")
	}
	if s := r.f.sentSince(mark); len(s) != 0 {
		t.Errorf("rejection sent %v, want nothing", types(s))
	}
	// Data now needs a new handshake.
	if r.f.sendData(fp, ourPacket(1)) {
		t.Fatalf("sendData after rejection = true, want false (no usable keypair)")
	}
	r.advance(50 * time.Millisecond)
	if inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0); len(inits) != 1 {
		t.Errorf("initiations after data past rejection = %d, want 1", len(inits))
	}
}

func TestRetryAndGiveUp(t *testing.T) {
	const jitter = 200 * time.Millisecond
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", fixJitter: jitter})
	r.f.drop.Store(true)
	fp := r.fp()
	fp.HandshakeNeeded.Store(true)
	t0 := r.now()
	r.dev.Tick(t0)
	const step = 50 * time.Millisecond
	for r.now()-t0 < int64(130*time.Second) {
		r.advance(step)
	}
	inits := ofType(r.f.sentSince(0), noise.TypeInitiation, noise.InitiationSize)
	// wireguard-go: the first initiation and MaxTimerHandshakes+1 = 19
	// retries ("did not complete after 20 attempts, giving up").
	if want := protocol.MaxHandshakeAttempts + 2; len(inits) != want {
		t.Fatalf("initiations = %d, want %d; %v", len(inits), want, types(inits))
	}
	for i := 1; i < len(inits); i++ {
		gap := inits[i].at - inits[i-1].at
		if lo, hi := int64(protocol.RekeyTimeout+jitter), int64(protocol.RekeyTimeout+jitter+step); gap < lo || gap > hi {
			t.Errorf("retry %d after %.3fs, want within [%.3f, %.3f] s", i, secs(gap), secs(lo), secs(hi))
		}
	}
	if fp.HandshakeNeeded.Load() {
		t.Errorf("HandshakeNeeded after give-up = true, want false (held packets dropped)")
	}
	if r.f.idx.Len() != 0 {
		t.Errorf("index table holds %d after give-up, want 0", r.f.idx.Len())
	}
	// New data starts a new round.
	fp.HandshakeNeeded.Store(true)
	mark := r.f.nsent()
	r.advance(step)
	if n := len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)); n != 1 {
		t.Errorf("initiations for new data after give-up = %d, want 1", n)
	}
}

// establishAsResponder makes wireguard-go initiate and send data, and
// returns when the data arrived (our keypair promoted).
func (r *rig) establishAsResponder() {
	r.t.Helper()
	r.wgSend(1)
	if _, ok := r.waitInner(waitLimit); !ok {
		r.t.Fatalf("no data from wireguard-go; sent %v", types(r.f.sentSince(0)))
	}
	r.dev.Tick(r.now())
}

func TestKeepaliveAfterReceiving(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.establishAsResponder()
	t0 := r.fp().Stamps.LastDataReceived.Load()
	mark := r.f.nsent()
	rx0 := wgRxBytes(t, r)
	for r.now()-t0 < int64(30*time.Second) {
		r.advance(100 * time.Millisecond)
	}
	ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)
	if len(ka) != 1 {
		t.Fatalf("keepalives in 30 s after one data packet = %d, want 1; %v", len(ka), types(r.f.sentSince(mark)))
	}
	if at := ka[0].at - t0; at != int64(protocol.KeepaliveTimeout) {
		t.Errorf("keepalive at +%.3fs, want +10 s", secs(at))
	}
	// wireguard-go accepts it: its peer's rx counter grows by 32 bytes.
	if !r.pump(waitLimit, func() bool { return wgRxBytes(t, r) >= rx0+noise.KeepaliveSize }) {
		t.Errorf("wireguard-go rx_bytes = %d, want at least %d (a keepalive more)", wgRxBytes(t, r), rx0+noise.KeepaliveSize)
	}
}

func TestNewHandshakeWithoutReply(t *testing.T) {
	const jitter = 100 * time.Millisecond
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", fixJitter: jitter})
	fp := r.fp()
	r.establishAsInitiator()
	r.advance(time.Second)
	r.f.drop.Store(true)
	t1 := r.now()
	if !r.f.sendData(fp, ourPacket(1)) {
		t.Fatal("sendData = false, want true")
	}
	mark := r.f.nsent()
	for r.now()-t1 < int64(20*time.Second) {
		r.advance(50 * time.Millisecond)
	}
	inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)
	if len(inits) == 0 {
		t.Fatalf("no initiation within 20 s of unanswered data; sent %v", types(r.f.sentSince(mark)))
	}
	want := int64(protocol.KeepaliveTimeout + protocol.RekeyTimeout + jitter)
	if at := inits[0].at - t1; at < want || at > want+int64(50*time.Millisecond) {
		t.Errorf("new handshake at +%.3fs, want +%.3fs", secs(at), secs(want))
	}
}

func TestPersistentKeepalive(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", keepalive: 25 * time.Second})
	kp := r.establishAsInitiator()
	t0 := kp.Created
	mark := r.f.nsent()
	for r.now()-t0 < int64(80*time.Second) {
		r.advance(500 * time.Millisecond)
	}
	ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)
	want := []int64{25, 50, 75}
	if len(ka) != len(want) {
		t.Fatalf("persistent keepalives in 80 s = %d, want %d; %v", len(ka), len(want), types(r.f.sentSince(mark)))
	}
	for i, p := range ka {
		if at := p.at - t0; at != want[i]*int64(time.Second) {
			t.Errorf("keepalive %d at +%.3fs, want +%d s", i, secs(at), want[i])
		}
	}
}

func TestPersistentKeepaliveTurnedOnSendsAtOnce(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	r.establishAsInitiator()
	mark := r.f.nsent()
	err := r.dev.IpcSet(stringsReader("public_key=" + r.wgPub.Hex() + "\npersistent_keepalive_interval=25\n"))
	if err != nil {
		t.Fatal(err)
	}
	// wireguard-go: turning a persistent keepalive on sends one at once.
	if ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize); len(ka) != 1 || ka[0].at != r.now() {
		t.Errorf("keepalives when turning on = %v, want one now", types(ka))
	}
}

func TestZeroingAfterRejectTimesThree(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	fp := r.fp()
	kp := r.establishAsInitiator()
	t0 := kp.Created
	p := r.dev.byKey[r.wgPub]
	for r.now()-t0 < int64(3*protocol.RejectAfterTime)-int64(20*time.Second) {
		r.advance(10 * time.Second)
	}
	r.advance(time.Duration(t0 + int64(3*protocol.RejectAfterTime) - int64(time.Second) - r.now()))
	r.dev.mu.Lock()
	armed := p.zeroAt
	r.dev.mu.Unlock()
	if want := t0 + 3*int64(protocol.RejectAfterTime); armed != want {
		t.Fatalf("zeroing armed at t0+%.3fs, want t0+540 s", secs(armed-t0))
	}
	r.advance(time.Duration(armed - r.now()))
	r.dev.mu.Lock()
	armed = p.zeroAt
	st := p.hs.State()
	r.dev.mu.Unlock()
	if armed != 0 {
		t.Errorf("zeroing still armed after 540 s")
	}
	if st != noise.StateZeroed {
		t.Errorf("handshake state after 540 s = %v, want zeroed", st)
	}
	if fp.Current.Load() != nil || fp.Previous.Load() != nil || fp.Next.Load() != nil || r.f.idx.Len() != 0 || !kp.Dead() {
		t.Errorf("key material left after 540 s: slots %p %p %p, %d indexes, dead %v",
			fp.Current.Load(), fp.Previous.Load(), fp.Next.Load(), r.f.idx.Len(), kp.Dead())
	}
}

func TestRoamingToNewEndpoint(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	fp := r.fp()
	r.establishAsResponder()
	a := netip.MustParseAddrPort("198.18.0.2:51820")
	if ep := fp.Endpoint.Load(); ep == nil || ep.Dst != a {
		t.Fatalf("endpoint = %v, want %v", ep, a)
	}
	// The peer moves: its next handshake comes from b.
	b := netip.MustParseAddrPort("198.18.7.9:40000")
	r.f.wgSrc.Store(&b)
	r.advance(time.Second)
	time.Sleep(25 * time.Millisecond) // wireguard-go's own initiation flood limit is on wall time
	if err := r.wg.Down(); err != nil {
		t.Fatal(err)
	}
	if err := r.wg.Up(); err != nil {
		t.Fatal(err)
	}
	mark := r.f.nsent()
	r.establishAsResponder()
	if ep := fp.Endpoint.Load(); ep == nil || ep.Dst != b {
		t.Fatalf("endpoint after roaming = %v, want %v", ep, b)
	}
	resp := ofType(r.f.sentSince(mark), noise.TypeResponse, 0)
	if len(resp) != 1 || resp[0].dst != b {
		t.Fatalf("responses after roaming = %v, want one to %v", types(resp), b)
	}
	t1 := r.now()
	for r.now()-t1 < int64(11*time.Second) {
		r.advance(500 * time.Millisecond)
	}
	ka := ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)
	if len(ka) != 1 || ka[0].dst != b {
		t.Errorf("keepalives after roaming = %v, want one to %v", types(ka), b)
	}
}

// TestCookieUnderLoad: while our dataplane reports load, stock wireguard-go's
// initiation gets a cookie reply instead of a response, and wireguard-go's
// retry (after its RekeyTimeout of 5 s wall time) carries a MAC2 that we
// accept.
func TestCookieUnderLoad(t *testing.T) {
	testenv.Short(t, "waits for wireguard-go's 5 s retry")
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.f.load.Store(true)
	r.wgSend(1)
	if !r.pump(waitLimit, func() bool { return len(ofType(r.f.sentSince(0), noise.TypeCookieReply, noise.CookieReplySize)) == 1 }) {
		t.Fatalf("no cookie reply under load; sent %v", types(r.f.sentSince(0)))
	}
	if n := len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)); n != 0 {
		t.Fatalf("responses under load without MAC2 = %d, want 0", n)
	}
	// wireguard-go retries after RekeyTimeout plus jitter, with MAC2.
	if _, ok := r.waitInner(waitLimit); !ok {
		t.Fatalf("no session after the cookie; sent %v; stats %+v", types(r.f.sentSince(0)), r.dev.Stats())
	}
	if n := len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)); n != 1 {
		t.Errorf("responses = %d, want 1", n)
	}
}

func TestBadMAC1FloodCostsNoCurve25519(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.dev.Settle() // the peers' static-static DH, computed in the background
	before := r.dev.Stats()
	msg := make([]byte, noise.InitiationSize)
	msg[0] = noise.TypeInitiation
	const n = 1000
	for i := 0; i < n; i++ {
		msg[4] = byte(i)
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("198.18.0.9:1"), Data: msg})
	}
	after := r.dev.Stats()
	if got := after.Noise.Curve25519 - before.Noise.Curve25519; got != 0 {
		t.Errorf("Curve25519 operations for %d bad-MAC1 initiations = %d, want 0", n, got)
	}
	if got := after.Drops[DropHandshakeInvalid] - before.Drops[DropHandshakeInvalid]; got != n {
		t.Errorf("Drops[handshake invalid] = %d, want %d", got, n)
	}
	if s := r.f.sentSince(0); len(s) != 0 {
		t.Errorf("sent %v in answer to bad MAC1, want nothing", types(s))
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// wgRxBytes is the rx_bytes wireguard-go reports for its one peer.
func wgRxBytes(t *testing.T, r *rig) int { return wgCounter(t, r, "rx_bytes=") }

// wgCounter is the value of key (with its "=") in wireguard-go's UAPI get
// for its one peer.
func wgCounter(t *testing.T, r *rig, key string) int {
	t.Helper()
	get, err := r.wg.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(get, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestByteCountersMirror: after a handshake each way and data, our peer's
// rx_bytes equal wireguard-go's tx_bytes and our tx_bytes its rx_bytes:
// both sides count the handshake messages they receive, as they count
// those they send (wireguard-go's RoutineHandshake, the kernel's
// wg_receive_handshake_packet). Before, ours left out the initiations and
// responses received, so `wg show` said "0 B received" on a gateway whose
// handshake had completed.
func TestByteCountersMirror(t *testing.T) {
	for _, c := range []struct {
		name      string
		establish func(r *rig)
	}{
		{"responder", func(r *rig) { r.establishAsResponder() }},
		{"initiator", func(r *rig) { r.establishAsInitiator() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820"})
			c.establish(r)
			fp := r.fp()
			if !r.pump(waitLimit, func() bool {
				return int(fp.RxBytes.Load()) == wgCounter(t, r, "tx_bytes=") && int(fp.TxBytes.Load()) == wgCounter(t, r, "rx_bytes=")
			}) {
				t.Errorf("ours rx_bytes %d tx_bytes %d, wireguard-go's tx_bytes %d rx_bytes %d; want them equal; sent %v",
					fp.RxBytes.Load(), fp.TxBytes.Load(), wgCounter(t, r, "tx_bytes="), wgCounter(t, r, "rx_bytes="), types(r.f.sentSince(0)))
			}
			if fp.RxBytes.Load() == 0 {
				t.Errorf("rx_bytes 0 after a handshake")
			}
		})
	}
}

// TestRekeyAfterMessages: a session past RekeyAfterMessages (2^60) starts a
// handshake whichever side initiated it (wireguard-go keepKeyFreshSending).
func TestRekeyAfterMessages(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.establishAsResponder()
	kp := r.fp().Current.Load()
	if kp == nil || kp.IsInitiator {
		t.Fatalf("Current = %v, want our responder keypair", kp)
	}
	mark := r.f.nsent()
	// Past RekeyTimeout since our response (a handshake message at most
	// once per RekeyTimeout, §6.1).
	r.advance(protocol.RekeyTimeout)
	if n := len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)); n != 0 {
		t.Fatalf("initiations before the message limit = %d, want 0", n)
	}
	kp.ReserveNonces(int(protocol.RekeyAfterMessages - kp.SendCounter()))
	// The sending workers publish the data they sent with those counters.
	storeMax(&r.fp().Stamps.LastDataSent, r.now())
	r.f.stamp(r.fp())
	r.advance(50 * time.Millisecond)
	if n := len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)); n != 1 {
		t.Errorf("initiations at RekeyAfterMessages = %d, want 1", n)
	}
}

// TestLastMinuteRekeyOnReceive: the initiator starts a handshake when data
// arrives on a session older than RejectAfterTime − KeepaliveTimeout −
// RekeyTimeout (165 s), before the session expires (wireguard-go
// keepKeyFreshReceiving).
func TestLastMinuteRekeyOnReceive(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	kp := r.establishAsInitiator()
	t0 := kp.Created
	r.advance(time.Duration(t0 + int64(164*time.Second) - r.now()))
	r.wgSend(1)
	if _, ok := r.waitInner(waitLimit); !ok {
		t.Fatal("no data from wireguard-go")
	}
	mark := r.f.nsent()
	r.advance(50 * time.Millisecond)
	if n := len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)); n != 0 {
		t.Fatalf("initiations on data at 164 s = %d, want 0", n)
	}
	r.advance(time.Duration(t0 + int64(165*time.Second) - r.now()))
	r.wgSend(2)
	if _, ok := r.waitInner(waitLimit); !ok {
		t.Fatal("no data from wireguard-go")
	}
	r.advance(50 * time.Millisecond)
	inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)
	if len(inits) != 1 {
		t.Fatalf("initiations on data at 165 s = %d, want 1; %v", len(inits), types(r.f.sentSince(mark)))
	}
}

// TestLastMinuteRekeyOnKeepalive: a keepalive (authenticated, empty)
// arriving on an initiator's session older than 165 s starts the handshake
// as data does (whitepaper §6.2; wireguard-go keepKeyFreshReceiving runs for
// every authenticated transport packet).
func TestLastMinuteRekeyOnKeepalive(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	kp := r.establishAsInitiator()
	r.advance(time.Duration(kp.Created + int64(165*time.Second) - r.now()))
	fp := r.fp()
	recv0, data0 := fp.Stamps.LastReceived.Load(), fp.Stamps.LastDataReceived.Load()
	mark := r.f.nsent()
	// wireguard-go sends a keepalive at once when persistent keepalive is
	// turned on for a peer with a session.
	ourPub := r.ourKey.PublicKey()
	if err := r.wg.IpcSet("public_key=" + ourPub.Hex() + "\npersistent_keepalive_interval=3600\n"); err != nil {
		t.Fatal(err)
	}
	if !r.pump(waitLimit, func() bool { return fp.Stamps.LastReceived.Load() > recv0 }) {
		t.Fatal("no keepalive from wireguard-go")
	}
	if fp.Stamps.LastDataReceived.Load() != data0 {
		t.Fatal("wireguard-go sent data, want a bare keepalive")
	}
	r.advance(50 * time.Millisecond)
	if inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0); len(inits) != 1 {
		t.Errorf("initiations on a keepalive at 165 s = %d, want 1; %v", len(inits), types(r.f.sentSince(mark)))
	}
}

// TestPersistentKeepaliveAtStart: a peer configured with a persistent
// keepalive before Start gets a keepalive when the device starts, which
// without a session is a handshake initiation (wireguard-go's Device.Up,
// the kernel's wg_open); one added with it to a running device gets it at
// once; a peer without one gets nothing.
func TestPersistentKeepaliveAtStart(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", keepalive: 25 * time.Second})
	quiet, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.dev.AddPeer(PeerConfig{PublicKey: quiet.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.0.3:51820")}); err != nil {
		t.Fatal(err)
	}
	mark := r.f.nsent()
	if inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0); len(inits) != 0 {
		t.Fatalf("initiations before Start: %d", len(inits))
	}
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	waitInits := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for len(ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)) < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0); len(got) != want {
			t.Fatalf("initiations = %d, want %d: %v", len(got), want, types(r.f.sentSince(mark)))
		}
	}
	waitInits(1) // the keepalive peer's, not the quiet one's
	late, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.dev.AddPeer(PeerConfig{PublicKey: late.PublicKey(), PersistentKeepalive: 10 * time.Second,
		Endpoint: netip.MustParseAddrPort("198.18.0.4:51820")}); err != nil {
		t.Fatal(err)
	}
	waitInits(2)
}

// TestInitiationWithoutEndpoint: a peer with no endpoint (a persistent
// keepalive, nothing heard from it yet) asks for handshakes that cannot be
// sent: each is counted as no_endpoint before any Curve25519 work, and
// holds no receiver index.
func TestInitiationWithoutEndpoint(t *testing.T) {
	r := newRig(t, rigOptions{keepalive: 25 * time.Second})
	p := r.dev.byKey[r.wgPub]
	r.dev.mu.Lock()
	r.dev.sendKeepaliveLocked(p, r.now())
	r.dev.mu.Unlock()
	st := r.dev.Stats()
	p.mu.Lock()
	pending := p.hasPending
	p.mu.Unlock()
	if st.Drops[DropNoEndpoint] != 1 || st.InitiationsSent != 0 || pending {
		t.Fatalf("no_endpoint %d, initiations sent %d, pending index %v; want 1, 0, false", st.Drops[DropNoEndpoint], st.InitiationsSent, pending)
	}
}

// TestInitiationAfterResponseJittered: after we answered the peer's
// initiation, our own initiation for data waiting comes no sooner than
// RekeyTimeout plus jitter after the response (whitepaper §6.1's limit
// and §6.4's jitter). It came exactly RekeyTimeout after: two gateways
// whose initiations crossed (each answering the other's and refusing the
// other's response, as the kernel does) then crossed again every 5 s for
// as long as both had traffic, 40 s and more without a session.
func TestInitiationAfterResponseJittered(t *testing.T) {
	const jitter = 200 * time.Millisecond
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", fixJitter: jitter})
	r.wgSend(1)
	if !r.pump(waitLimit, func() bool { return len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)) > 0 }) {
		t.Fatalf("no response to wireguard-go's initiation; sent %v", types(r.f.sentSince(0)))
	}
	// wireguard-go's data is never delivered (not pumped, then lost):
	// our keypair stays unconfirmed, and our own data needs a handshake.
	r.f.drop.Store(true)
	respAt := ofType(r.f.sentSince(0), noise.TypeResponse, 0)[0].at
	r.fp().HandshakeNeeded.Store(true) // our data waits
	const step = 10 * time.Millisecond
	for r.now()-respAt < int64(protocol.RekeyTimeout+jitter+2*step) {
		r.advance(step)
	}
	inits := ofType(r.f.sentSince(0), noise.TypeInitiation, noise.InitiationSize)
	if len(inits) == 0 {
		t.Fatalf("no initiation %.3f s after the response; sent %v", secs(r.now()-respAt), types(r.f.sentSince(0)))
	}
	if gap, least := inits[0].at-respAt, int64(protocol.RekeyTimeout+jitter); gap < least || gap > least+int64(step) {
		t.Errorf("our initiation %.3f s after our response, want %.3f s (RekeyTimeout plus jitter)", secs(gap), secs(least))
	}
}

// TestCrossedInitiationsRetry: our data waited, so we initiated; the
// peer's initiation crossed ours and we answered it, abandoning our own
// (its retry stops: a response counts as the handshake sent, §6.1), and
// the peer refused our answer as the answer to an initiation it had
// abandoned in turn (the kernel and wireguard-go do). No data comes on
// the session we answered, and ours still waits: we initiate again once
// RekeyTimeout plus jitter has passed since the response. Before, the
// need had been cleared by our first initiation and the workers, still
// holding the data, do not ask twice: neither side initiated again, and
// the tunnel carried nothing, the held packets waiting (no retry, so no
// give-up either) until the peer initiated for a reason of its own (a
// TestRejectAfterTime in internal/testing/stacktest that failed when
// both sides' initiations crossed).
func TestCrossedInitiationsRetry(t *testing.T) {
	const jitter = 200 * time.Millisecond
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1", wgEP: "198.18.0.2:51820", fixJitter: jitter})
	fp := r.fp()
	fp.HandshakeNeeded.Store(true) // a worker holds our data
	r.advance(50 * time.Millisecond)
	if n := len(ofType(r.f.sentSince(0), noise.TypeInitiation, 0)); n != 1 {
		t.Fatalf("initiations for the data waiting = %d, want 1; sent %v", n, types(r.f.sentSince(0)))
	}
	// The peer's own initiation, made before ours reached it.
	wgID := noise.NewStaticIdentity(r.wgKey, nil)
	wgHS := noise.NewHandshake(wgID, r.ourKey.PublicKey(), r.psk)
	var init [noise.InitiationSize]byte
	if err := wgHS.CreateInitiation(&init, 7); err != nil {
		t.Fatal(err)
	}
	mark := len(r.f.sentSince(0))
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("198.18.0.2:51820"), SrcMAC: wgMAC, Data: init[:]})
	resps := ofType(r.f.sentSince(mark), noise.TypeResponse, 0)
	if len(resps) != 1 {
		t.Fatalf("no response to the peer's crossing initiation; sent %v", types(r.f.sentSince(mark)))
	}
	respAt := resps[0].at
	const step = 10 * time.Millisecond
	for r.now()-respAt < int64(protocol.RekeyTimeout+jitter+2*step) {
		r.advance(step)
	}
	inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)
	if len(inits) == 0 {
		t.Fatalf("no initiation %.3f s after answering the crossing initiation, our data still waiting; sent %v", secs(r.now()-respAt), types(r.f.sentSince(mark)))
	}
	if gap, least := inits[0].at-respAt, int64(protocol.RekeyTimeout+jitter); gap < least {
		t.Errorf("our initiation %.3f s after our response, want no sooner than %.3f s (RekeyTimeout plus jitter)", secs(gap), secs(least))
	}
}
