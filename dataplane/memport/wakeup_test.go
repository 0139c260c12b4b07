package memport_test

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestNoLostWakeup: a receiver that blocks in a Waiter without a timeout
// whenever its queues are empty, as a fast-path worker does, is woken for
// every frame two transmitters send at random moments, round after round,
// so that frames are published while it arms, while it polls and while it
// sleeps. A lost wakeup leaves a frame on a ring while the receiver sleeps
// for good: the round never completes and the test fails after 20 s (not a
// timing bound: a healthy round takes microseconds).
func TestNoLostWakeup(t *testing.T) {
	// Arm dawdles for up to ~5 µs between arming and looking at the
	// rings, so that transmissions land inside that window often.
	var armRng atomic.Uint64
	memport.SetArmDelay(func() {
		d := time.Duration(armRng.Add(0x9e3779b97f4a7c15) >> 52) // 0..4095 ns
		for t0 := time.Now(); time.Since(t0) < d; {
		}
	})
	defer memport.SetArmDelay(nil)
	a, b := newPair(t, memport.Config{Queues: 2})
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		w.Add(b.Queue(q).RX())
	}
	var got atomic.Int64
	var stop atomic.Bool
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]dataplane.Frame, 64)
		for !stop.Load() {
			n := 0
			for q := range 2 {
				rx := b.Queue(q).RX()
				m := rx.Receive(buf)
				rx.Free(buf[:m])
				n += m
			}
			if n > 0 {
				got.Add(int64(n))
				continue
			}
			if _, err := w.Wait(dataplane.Forever); err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
		}
	}()
	defer func() {
		stop.Store(true)
		w.Ring()
		<-recvDone
		w.Close()
	}()

	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	// Each transmitter owns TX queue g of a and sends one frame per round
	// after a random delay of up to ~8 µs (spun, so that it lands
	// anywhere in the receiver's receive / arm / poll cycle).
	start := make([]chan struct{}, 2)
	var wg sync.WaitGroup
	for g := range 2 {
		start[g] = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := a.Queue(g).TX()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			fr := make([]dataplane.Frame, 1)
			for range start[g] {
				for d, t0 := time.Duration(rng.IntN(8000)), time.Now(); time.Since(t0) < d; {
				}
				if tx.Alloc(fr) != 1 {
					t.Errorf("transmitter %d: Alloc failed", g)
					return
				}
				udpFrame(&fr[0], uint16(1000+rng.IntN(1000)), 64)
				if tx.Transmit(fr) != 1 {
					t.Errorf("transmitter %d: Transmit took nothing", g)
					return
				}
			}
		}()
	}
	defer func() {
		for g := range 2 {
			close(start[g])
		}
		wg.Wait()
	}()
	for round := range rounds {
		for g := range 2 {
			start[g] <- struct{}{}
		}
		want := int64(2 * (round + 1))
		deadline := time.Now().Add(20 * time.Second)
		for got.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the receiver got %d of %d frames and sleeps: a lost wakeup", round, got.Load(), want)
			}
			runtime.Gosched()
		}
	}
}
