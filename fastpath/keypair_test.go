package fastpath

import (
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

func newTestKeypair(t *testing.T) *Keypair {
	t.Helper()
	k := [32]byte{1}
	kp, err := NewKeypair(&k, &k, 1, 2, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// TestReserveNoncesNeverWraps starts a keypair a few counters short of
// protocol.RejectAfterMessages and has many goroutines reserve far past the limit
// (and past 2^64, where a bare atomic add wraps to 0): every counter below
// the limit is handed out exactly once and none at or past it.
func TestReserveNoncesNeverWraps(t *testing.T) {
	const (
		left       = 1000 // counters still usable at the start
		goroutines = 8
		calls      = 2000 // per goroutine; × n is far more than 2^13 past the limit
		n          = 64
	)
	kp := newTestKeypair(t)
	start := uint64(protocol.RejectAfterMessages - left)
	kp.sendNonce.Store(start)

	got := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				first, granted := kp.ReserveNonces(n)
				if granted < 0 || granted > n {
					t.Errorf("ReserveNonces(%d) granted %d", n, granted)
					return
				}
				for i := range granted {
					got[g] = append(got[g], first+uint64(i))
				}
			}
		}()
	}
	wg.Wait()

	seen := make(map[uint64]bool, left)
	for _, cs := range got {
		for _, c := range cs {
			if c < start || c >= protocol.RejectAfterMessages {
				t.Fatalf("counter %#x handed out, want within [%#x, %#x)", c, start, uint64(protocol.RejectAfterMessages))
			}
			if seen[c] {
				t.Fatalf("counter %#x handed out twice (nonce reuse)", c)
			}
			seen[c] = true
		}
	}
	if len(seen) != left {
		t.Errorf("%d counters handed out, want all %d below the limit", len(seen), left)
	}
	if first, granted := kp.ReserveNonces(1); granted != 0 {
		t.Errorf("after exhaustion ReserveNonces(1) = %#x, %d, want 0 granted", first, granted)
	}
}

// TestReserveNoncesSequential checks the single-caller edges: a range that
// ends exactly at the limit is granted in full, one that straddles it in part.
func TestReserveNoncesSequential(t *testing.T) {
	kp := newTestKeypair(t)
	kp.sendNonce.Store(protocol.RejectAfterMessages - 10)
	if first, granted := kp.ReserveNonces(4); first != protocol.RejectAfterMessages-10 || granted != 4 {
		t.Errorf("ReserveNonces(4) = %#x, %d, want %#x, 4", first, granted, uint64(protocol.RejectAfterMessages-10))
	}
	if first, granted := kp.ReserveNonces(6); first != protocol.RejectAfterMessages-6 || granted != 6 {
		t.Errorf("ReserveNonces(6) = %#x, %d, want %#x, 6 (ends at the limit)", first, granted, uint64(protocol.RejectAfterMessages-6))
	}
	if _, granted := kp.ReserveNonces(1); granted != 0 {
		t.Errorf("ReserveNonces(1) at the limit granted %d, want 0", granted)
	}

	kp = newTestKeypair(t)
	kp.sendNonce.Store(protocol.RejectAfterMessages - 3)
	if first, granted := kp.ReserveNonces(64); first != protocol.RejectAfterMessages-3 || granted != 3 {
		t.Errorf("straddling ReserveNonces(64) = %#x, %d, want %#x, 3", first, granted, uint64(protocol.RejectAfterMessages-3))
	}
	for range 1000 {
		if _, granted := kp.ReserveNonces(64); granted != 0 {
			t.Fatalf("ReserveNonces past the limit granted %d", granted)
		}
	}
	if c := kp.SendCounter(); c != protocol.RejectAfterMessages {
		t.Errorf("SendCounter() = %#x, want %#x (held at the limit)", c, uint64(protocol.RejectAfterMessages))
	}
}

// TestUsedInPrevious: a responder's keypair that Rotate moved from Next to
// Previous (our own exchange completed first) stays unconfirmed when data
// arrives on it, but is marked used (Keypair.Used), so that the control
// plane does not count it as never used when it retires it.
func TestUsedInPrevious(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	_, kb := r.installKeys() // B's keypair waits in Next
	var k1, k2 [32]byte
	ib, err := r.b.Indexes().Allocate()
	if err != nil {
		t.Fatal(err)
	}
	own, err := NewKeypair(&k1, &k2, ib, 99, true, r.clock.Now(), r.peerBA)
	if err != nil {
		t.Fatal(err)
	}
	r.b.Indexes().Publish(ib, own)
	r.peerBA.Rotate(own) // B's own exchange: kb goes to Previous
	if r.peerBA.Previous.Load() != kb || kb.Used() {
		t.Fatalf("before data: Previous = %p (want %p), Used() = %v, want false", r.peerBA.Previous.Load(), kb, kb.Used())
	}
	tx := r.hostA.Queue(0).TX()
	sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(1, 40))})
	r.a.workers[0].outbound(r.clock.Now())
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, time.Second, nil); got != 1 {
		t.Fatalf("delivered %d on the keypair in Previous, want 1; drops B %v", got, TotalDrops(r.b.Stats()))
	}
	if !kb.Used() || kb.Confirmed() || r.peerBA.Current.Load() != own {
		t.Errorf("after data: Used() = %v, Confirmed() = %v, Current is ours %v; want true, false, true", kb.Used(), kb.Confirmed(), r.peerBA.Current.Load() == own)
	}
}
