package fastpath

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/protocol"
)

// gateResolver pauses the worker that calls Resolve until released: the
// worker is then in the middle of a batch (inbound: after Open, before the
// replay check and delivery), holding the keypair it opened with.
type gateResolver struct {
	inner   Resolver
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gateResolver) Resolve(a netip.Addr) ([6]byte, bool) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.inner.Resolve(a)
}

func keysErased(kp *Keypair) bool { return kp.send.IsZero() && kp.receive.IsZero() }

// waitReaped calls Reap, as the control plane's tick does, until nothing
// waits. The bound is not a timing assertion: a worker that is scheduled at
// all passes a batch boundary in microseconds.
func waitReaped(t *testing.T, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.Reap() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("retired keypairs still wait after 20 s; workers' states %v", workerStates(e))
		}
		time.Sleep(time.Millisecond)
	}
}

func workerStates(e *Engine) []uint64 {
	var s []uint64
	for _, w := range e.workers {
		s = append(s, w.quiet.v.Load())
	}
	return s
}

// TestRetireWaitsForBatchBoundary: a keypair retired while a worker is in
// the middle of a batch that uses it keeps its keys until the worker has
// passed the batch boundary; then every key byte is zero.
func TestRetireWaitsForBatchBoundary(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	_, kb := r.installKeys()
	gate := &gateResolver{inner: r.b.cfg.LANResolver, entered: make(chan struct{}), release: make(chan struct{})}
	r.b.cfg.LANResolver = gate // before Start: the workers read it after
	r.a.Start()
	r.b.Start()
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()

	tx := r.hostA.Queue(0).TX()
	sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("B's worker never reached the LAN resolver; drops B %v", TotalDrops(r.b.Stats()))
	}
	// B's worker is mid-batch with kb. The control plane's part:
	// unpublish, then retire.
	r.peerBA.ClearKeypairs()
	r.b.Indexes().Free(kb.LocalIndex)
	r.b.Retire(kb)
	if !kb.Dead() {
		t.Fatal("a retired keypair is not dead")
	}
	for i := 0; i < 3; i++ {
		if n := r.b.Reap(); n != 1 {
			t.Fatalf("Reap with the worker mid-batch: %d pending, want 1", n)
		}
	}
	if kb.send.IsZero() || kb.receive.IsZero() {
		t.Fatal("keys erased while a worker was mid-batch with the keypair")
	}
	close(gate.release)
	released = true
	waitReaped(t, r.b)
	if !keysErased(kb) {
		t.Fatal("keys not erased after the worker passed the batch boundary")
	}
	// The packet the worker held was authenticated before the retirement
	// and is delivered.
	if got := recvAll(t, r.hostB, 1, 20*time.Second, nil); got != 1 {
		t.Fatalf("%d packets arrived, want 1; drops B %v", got, TotalDrops(r.b.Stats()))
	}
}

// TestRetireIdleWorkers: parked workers hold no keypair and do not delay
// erasure: an engine whose workers are idle (or not started) erases the keys
// within Retire itself.
func TestRetireIdleWorkers(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true, queues: 2})
	ka, kb := r.installKeys()
	// Not started: the workers are parked from the start.
	r.peerAB.ClearKeypairs()
	r.a.Indexes().Free(ka.LocalIndex)
	r.a.Retire(ka)
	if !ka.Dead() || !keysErased(ka) {
		t.Fatalf("engine not started: dead %v, erased %v; want both", ka.Dead(), keysErased(ka))
	}

	r.b.Start()
	// Wait for every worker to park (nothing wakes them afterwards: no
	// traffic, no dirty peer).
	deadline := time.Now().Add(20 * time.Second)
	for {
		parked := true
		for _, s := range workerStates(r.b) {
			parked = parked && s&1 == 1 && s > 1
		}
		if parked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers never parked: states %v", workerStates(r.b))
		}
		time.Sleep(time.Millisecond)
	}
	r.peerBA.ClearKeypairs()
	r.b.Indexes().Free(kb.LocalIndex)
	r.b.Retire(kb)
	if !keysErased(kb) {
		t.Fatalf("parked workers (states %v): keys not erased by Retire", workerStates(r.b))
	}
	if n := r.b.Reap(); n != 0 {
		t.Fatalf("Reap: %d pending, want 0", n)
	}
}

// pumpHost sends bursts of tmpl from host p and adds what arrives on
// p to received, until stop is closed.
func pumpHost(p *memport.Port, tmpl []byte, received *atomic.Int64, stop <-chan struct{}) {
	tx, rx := p.Queue(0).TX(), p.Queue(0).RX()
	frames := make([]dataplane.Frame, 16)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		sent := tx.Transmit(frames[:n])
		tx.Free(frames[sent:n])
		got := rx.Receive(frames)
		received.Add(int64(got))
		rx.Free(frames[:got])
		if got == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// TestRetireUnderTraffic retires keypairs (rotated out, and whole sessions
// reset) while traffic flows both ways: no packet may be sealed with an
// erased key (the far side would count it as an authentication failure),
// nothing races (run with -race), and every retired keypair ends erased.
//
// Most sessions are replaced at once, retiring keypairs the workers may
// be using; every tenth is kept until it has carried traffic both ways
// (trafficBothWays), so that traffic flows whatever the machine's load.
// Paced by the clock alone, B sent nothing on a loaded machine: B's
// keypair waits in Next until A's data on it arrives, and A's keypair of
// that session is retired two sessions later, so B→A needs two round
// trips through the workers within two turns of the loop.
func TestRetireUnderTraffic(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	r.installKeys()
	txA, txB := r.hostA.Queue(0).TX(), r.hostB.Queue(0).TX()
	fa := udpFrame(t, txA, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 64))
	fb := udpFrame(t, txB, r.lanB.MAC(), r.hostB.MAC(), hostAddrB, hostAddrA, 2, 1, seqPayload(2, 64))
	tmplA, tmplB := append([]byte(nil), fa.Data()...), append([]byte(nil), fb.Data()...)
	txA.Free([]dataplane.Frame{fa})
	txB.Free([]dataplane.Frame{fb})
	r.a.Start()
	r.b.Start()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var gotA, gotB atomic.Int64
	wg.Add(2)
	go func() { defer wg.Done(); pumpHost(r.hostA, tmplA, &gotA, stop) }()
	go func() { defer wg.Done(); pumpHost(r.hostB, tmplB, &gotB, stop) }()
	defer func() { // also when the test fails before the end
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()

	// trafficBothWays waits until the session whose responder's keypair
	// is kb has carried data both ways: A's data promoted kb at B, then
	// more arrived at host A, sent by B once kb was current (or held for
	// it until then). The bound is not a timing assertion: scheduled at
	// all, the workers carry a packet in microseconds.
	trafficBothWays := func(i int, kb *Keypair) {
		t.Helper()
		const hang = time.Minute
		if !testenv.PollUntil(hang, func() bool { return r.peerBA.Current.Load() == kb }) {
			t.Fatalf("session %d: B's keypair not confirmed by A's data within %v; received at A %d, at B %d; drops A %v, B %v",
				i, hang, gotA.Load(), gotB.Load(), TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
		}
		a := gotA.Load()
		if !testenv.PollUntil(hang, func() bool { return gotA.Load() > a }) {
			t.Fatalf("session %d: nothing from B arrived at A within %v of B's keypair confirmed; received at A %d, at B %d; drops A %v, B %v",
				i, hang, gotA.Load(), gotB.Load(), TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
		}
	}

	var retired []*Keypair
	retire := func(e *Engine, kp *Keypair) {
		e.Indexes().Free(kp.LocalIndex)
		e.Retire(kp)
		retired = append(retired, kp)
	}
	for i := 0; i < 200; i++ {
		_, kb, dropped := r.newSession()
		for _, kp := range dropped {
			if kp.Peer == r.peerAB {
				retire(r.a, kp)
			} else {
				retire(r.b, kp)
			}
		}
		if i%20 == 19 { // a session reset: every keypair goes
			for _, kp := range r.peerAB.ClearKeypairs() {
				if kp != nil {
					retire(r.a, kp)
				}
			}
			for _, kp := range r.peerBA.ClearKeypairs() {
				if kp != nil {
					retire(r.b, kp)
				}
			}
		}
		if i%5 == 0 {
			r.a.Reap()
			r.b.Reap()
		}
		if i%10 == 0 {
			trafficBothWays(i, kb)
		}
		time.Sleep(500 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	waitReaped(t, r.a)
	waitReaped(t, r.b)
	for i, kp := range retired {
		if !keysErased(kp) {
			t.Fatalf("retired keypair %d of %d not erased", i, len(retired))
		}
	}
	da, db := TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats())
	t.Logf("%d keypairs retired; received at A %d, at B %d; drops A %v, B %v", len(retired), gotA.Load(), gotB.Load(), da, db)
	if da[DropAuth] != 0 || db[DropAuth] != 0 {
		t.Fatalf("authentication failures: A %d, B %d; want 0 (a packet sealed with an erased key?)", da[DropAuth], db[DropAuth])
	}
}

// addrGate pauses the worker that resolves addr, once armed: a burst
// whose last packet goes to addr holds the worker after that burst's
// Open and replay check have been reached for the packets before it.
type addrGate struct {
	inner   Resolver
	addr    netip.Addr
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *addrGate) Resolve(a netip.Addr) ([6]byte, bool) {
	if a == g.addr && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.inner.Resolve(a)
}

// sealedTo is a transport message of A's keypair ka at counter c carrying
// an IPv4/UDP packet from hostAddrA to dst with payload.
func sealedTo(ka *Keypair, c uint64, dst netip.Addr, payload []byte) []byte {
	inner := make([]byte, header.IPv4MinLen+header.UDPLen+len(payload), header.IPv4MinLen+header.UDPLen+len(payload)+15)
	f := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, Src: hostAddrA.As4(), Dst: dst.As4()}
	header.PutIPv4(inner, &f, header.UDPLen+len(payload))
	header.PutUDP(inner[header.IPv4MinLen:], 1, 2, len(payload))
	copy(inner[header.IPv4MinLen+header.UDPLen:], payload)
	u := header.UDP(inner[header.IPv4MinLen:])
	u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, hostAddrA, dst, header.UDPLen+len(payload)))
	for len(inner)%16 != 0 {
		inner = append(inner, 0)
	}
	msg := make([]byte, protocol.TransportHeaderSize, protocol.TransportHeaderSize+len(inner)+16)
	msg[0] = protocol.TypeTransport
	binary.LittleEndian.PutUint32(msg[4:8], ka.RemoteIndex)
	binary.LittleEndian.PutUint64(msg[8:16], c)
	return ka.Seal(msg, inner, c)
}

// TestRetireKeepsReplayWindow: a keypair retired while a worker is in a
// burst it opened keeps its replay window until the grace period ends, so
// a replayed message in that burst is still refused. Retire emptied the
// window at once, and the replay (authenticated: it is a genuine message,
// sent again) was delivered a second time.
func TestRetireKeepsReplayWindow(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	ka, kb := r.installKeys()
	gated := netip.MustParseAddr("198.19.2.99")
	gate := &addrGate{inner: r.b.cfg.LANResolver, addr: gated, entered: make(chan struct{}), release: make(chan struct{})}
	r.b.cfg.LANResolver = gate // before Start: the workers read it after
	r.b.Start()                // A is not started: the test plays A on B's WAN
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()
	first := sealedTo(ka, 0, hostAddrB, seqPayload(7, 40))
	sendAll(t, r.wanA, 0, []dataplane.Frame{wanFrame(t, r, first)})
	if got := recvAll(t, r.hostB, 1, 20*time.Second, nil); got != 1 {
		t.Fatalf("the first message: %d delivered, want 1; drops B %v", got, TotalDrops(r.b.Stats()).List())
	}
	// One burst: the first message again (a replay), then a new one to a
	// destination the worker resolves at the gate, after the burst's Open.
	gate.armed.Store(true)
	fresh := sealedTo(ka, 1, gated, seqPayload(8, 40))
	sendAll(t, r.wanA, 0, []dataplane.Frame{wanFrame(t, r, first), wanFrame(t, r, fresh)})
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("B's worker never reached the gate; drops B %v", TotalDrops(r.b.Stats()).List())
	}
	// The control plane ends the session (the peer removed, its key
	// changed) while the worker is in the burst.
	r.peerBA.ClearKeypairs()
	r.b.Indexes().Free(kb.LocalIndex)
	r.b.Retire(kb)
	close(gate.release)
	released = true
	var seqs []uint32
	recvAll(t, r.hostB, 2, 500*time.Millisecond, func(_ int, d []byte) {
		_, pl := checkUDP(t, d)
		seqs = append(seqs, binary.BigEndian.Uint32(pl))
	})
	if len(seqs) != 1 || seqs[0] != 8 {
		t.Fatalf("delivered the payloads %v, want only the new one (8): the replay went through; drops B %v", seqs, TotalDrops(r.b.Stats()).List())
	}
	if d := TotalDrops(r.b.Stats())[DropReplay]; d != 1 {
		t.Errorf("drops[replay] = %d, want 1", d)
	}
	waitReaped(t, r.b)
}
