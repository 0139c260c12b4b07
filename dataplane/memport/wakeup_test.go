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
// every frame, round after round. In even rounds the frame is transmitted
// from inside Arm, between arming and looking at the rings (through the
// test hook; the receiver waits there until it is sent), the window a
// broken handshake loses it in; in odd rounds two transmitters send at
// random moments, so that frames also land while the receiver polls and
// while it sleeps. A lost wakeup leaves a frame on a ring while the
// receiver sleeps for good: the round never completes and the test fails
// after 20 s (not a timing bound: a healthy round takes microseconds). It
// fails at once when Arm looks at the rings before it arms. Both ways of
// waking: the Waiter's channel (memport's halves are dataplane.Notifiers)
// and poll(2) on the eventfds (the halves wrapped so that they are not).
func TestNoLostWakeup(t *testing.T) {
	t.Run("channel", func(t *testing.T) { noLostWakeup(t, false) })
	t.Run("poll", func(t *testing.T) { noLostWakeup(t, true) })
}

// pollOnly hides an RX half's Notify method: a Waiter polls its WaitFD.
type pollOnly struct{ dataplane.RX }

func noLostWakeup(t *testing.T, poll bool) {
	// inArm asks the hook to have transmitter 0 send while Arm is in its
	// window. The hook waits for the request while the receiver has all
	// the frames wanted so far (got == want: the next round is about to
	// begin), up to hookWait, yielding: under the race detector on a
	// loaded machine the test's goroutine may not run for a millisecond
	// and more (with a fixed 200 µs wait, no request of 75 rounds came in
	// time once). A round that wants frames ends the wait at once.
	const hookWait, requestWait = 5 * time.Millisecond, 20 * time.Millisecond
	var inArm atomic.Bool
	var got, want atomic.Int64
	type request struct {
		delay time.Duration
		ack   bool // signal sent when done (the hook's request)
	}
	start := make([]chan request, 2)
	sent := make(chan struct{}, 1)
	for g := range 2 {
		start[g] = make(chan request, 1)
	}
	memport.SetArmDelay(func() {
		for t0 := time.Now(); time.Since(t0) < hookWait; runtime.Gosched() {
			if inArm.CompareAndSwap(true, false) {
				start[0] <- request{ack: true}
				<-sent
				return
			}
			if got.Load() != want.Load() {
				return
			}
		}
	})
	defer memport.SetArmDelay(nil)
	a, b := newPair(t, memport.Config{Queues: 2})
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		if poll {
			w.Add(pollOnly{b.Queue(q).RX()})
		} else {
			w.Add(b.Queue(q).RX())
		}
	}
	if w.Parks() == poll {
		t.Fatalf("Waiter.Parks() = %v with poll %v", w.Parks(), poll)
	}
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

	// Transmitter g owns TX queue g of a and sends one frame per request
	// after the requested delay (spun, not slept).
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := a.Queue(g).TX()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			fr := make([]dataplane.Frame, 1)
			for req := range start[g] {
				for t0 := time.Now(); time.Since(t0) < req.delay; {
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
				if req.ack {
					sent <- struct{}{}
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

	rounds := 600
	if testing.Short() {
		rounds = 150
	}
	rng := rand.New(rand.NewPCG(7, 7))
	inWindow := 0
	for round := range rounds {
		if round%2 == 0 {
			inArm.Store(true) // before want moves: the hook looks at inArm first
			want.Add(1)
			// If the receiver is already asleep, nothing takes the
			// request: send directly after a while.
			for t0 := time.Now(); inArm.Load() && time.Since(t0) < requestWait; {
				runtime.Gosched()
			}
			if inArm.CompareAndSwap(true, false) {
				start[0] <- request{}
			} else {
				inWindow++
			}
		} else {
			want.Add(2)
			for g := range 2 {
				start[g] <- request{delay: time.Duration(rng.IntN(8000))}
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for got.Load() < want.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the receiver got %d of %d frames and sleeps: a lost wakeup", round, got.Load(), want.Load())
			}
			runtime.Gosched()
		}
	}
	if inWindow == 0 {
		t.Errorf("no frame was sent inside Arm's window in %d rounds", rounds/2)
	}
	t.Logf("%d of %d frames sent inside Arm's window", inWindow, rounds/2)
}
