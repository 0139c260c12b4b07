package fastpath

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/internal/testenv"
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
