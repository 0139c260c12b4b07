package fastpath

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// wakeBound is how long TestWorkerNoLostWakeup waits for a frame (or for
// the workers to block) before it calls the wake-up lost.
const wakeBound = 20 * time.Second

var wakeRounds = flag.Int("wakerounds", 0, "TestWorkerNoLostWakeup: rounds per mode (0: 400, 100 with -short)")

// TestWorkerNoLostWakeup: a worker that has blocked in its Waiter is woken
// by every frame, whatever races the frame: it is sent while the worker
// still yields or spins, while it arms its queues (its quiescent state is
// published just before), once it sleeps; with a Kick of the same worker
// just before or after; right after the thread policy changed under it
// (ClaimProcs, GOMAXPROCS), which moves an owned worker to shared and back
// at its next wake-up. One frame per round goes from host A through both
// gateways to host B, so both workers are woken by it, by a memport
// transmitter; no other traffic, and nothing else wakes them after the
// round's own disturbance (the rig's clock moves on by PublishInterval per
// round, so that the workers block with no timeout). Rounds sent right
// after the previous frame came out are the bench's closed loop (bench/scale,
// memory part): the transmitter that woke the worker took its arming, so
// only Arm's check of the rings sees a frame that lands while the worker
// spins. A lost wake-up leaves the frame on a ring for good: the round
// fails after wakeBound (not a timing bound: a healthy round takes
// microseconds, the slowest seen on a loaded 2-CPU machine 0.4 s; only a
// wake-up that never comes exceeds it), after a
// dump of both workers' state and a Kick that shows whether the frame was
// only waiting for a wake-up. Shared workers (Config.Share) and owned ones.
func TestWorkerNoLostWakeup(t *testing.T) {
	t.Run("shared", func(t *testing.T) { workerNoLostWakeup(t, true) })
	t.Run("owned", func(t *testing.T) { workerNoLostWakeup(t, false) })
}

func workerNoLostWakeup(t *testing.T, share bool) {
	rounds := *wakeRounds
	if rounds == 0 {
		rounds = 400
		if testing.Short() {
			rounds = 100
		}
	}
	r := newRig(t, rigConfig{start: true, share: share})
	wa, wb := r.a.workers[0], r.b.workers[0]
	// Restored at the end: the thread policy's inputs this test moves.
	procs := runtime.GOMAXPROCS(0)
	claimed := 0
	defer func() {
		ClaimProcs(-claimed)
		runtime.GOMAXPROCS(procs)
	}()

	// kick runs one Kick of engine A or B after a delay (spun), so that
	// it races the round's frame; the round waits for it before it waits
	// for the frame.
	type kickReq struct {
		e     *Engine
		delay time.Duration
	}
	kicks := make(chan kickReq)
	kicked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range kicks {
			for t0 := time.Now(); time.Since(t0) < k.delay; {
			}
			k.e.Kick()
			kicked <- struct{}{}
		}
	}()
	defer func() {
		close(kicks)
		wg.Wait()
	}()

	// The rig's clock stands still, so a worker would keep the peer a frame
	// made dirty and block with a timeout of PublishInterval, which would
	// end a lost wake-up too. Before each frame the clock moves on by that
	// interval: the turn that handles the frame publishes, and the worker
	// then blocks with no timeout.
	parked := func(w *worker) bool { return w.quiet.v.Load()&1 == 1 }
	waitParked := func(round int) {
		deadline := time.Now().Add(wakeBound)
		for !parked(wa) || !parked(wb) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the workers did not block within %v of their last frame (%s)", round, wakeBound, wakeState(r))
			}
			runtime.Gosched()
		}
	}

	rng := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	rx := r.hostB.Queue(0).RX()
	buf := make([]dataplane.Frame, 8)
	var slow, kinds [6]int
	for round := range rounds {
		kind := rng.IntN(len(kinds))
		kinds[kind]++
		var kick *kickReq
		switch kind {
		case 0: // both asleep (or arming: parked is published before Wait)
			waitParked(round)
		case 1: // closed loop: while the workers still yield or spin after
			// the last frame, or arm (the transmitter that woke them took
			// the arming: only the check of the rings sees this frame)
			d := time.Duration(rng.IntN(60_000))
			if rng.IntN(2) == 0 {
				d /= 8 // around a shared worker's sharedSpin
			}
			for t0 := time.Now(); time.Since(t0) < d; {
			}
		case 2: // asleep a while
			waitParked(round)
			for t0, d := time.Now(), time.Duration(rng.IntN(200))*time.Microsecond; time.Since(t0) < d; {
				runtime.Gosched()
			}
		case 3: // a Kick of the worker the frame wakes first, racing it
			waitParked(round)
			kick = &kickReq{r.a, time.Duration(rng.IntN(20_000))}
		case 4: // the same for the second worker
			waitParked(round)
			kick = &kickReq{r.b, time.Duration(rng.IntN(40_000))}
		case 5: // the thread policy changes: owned workers become shared or back
			if claimed == 0 {
				claimed = runtime.GOMAXPROCS(0)
				ClaimProcs(claimed)
			} else {
				ClaimProcs(-claimed)
				claimed = 0
			}
			if rng.IntN(4) == 0 {
				runtime.GOMAXPROCS(1 + rng.IntN(4))
			}
			if rng.IntN(2) == 0 {
				waitParked(round)
			}
		}
		if round%1000 == 999 {
			r.installKeys() // the clock moved 50 s: a fresh session
			waitParked(round)
		}
		r.clock.Advance(PublishInterval)
		if kick != nil {
			kicks <- *kick
		}
		f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(round), 64))
		t0 := time.Now()
		sendAll(t, r.hostA, 0, []dataplane.Frame{f})
		if kick != nil {
			<-kicked
		}
		got := 0
		for got == 0 {
			n := rx.Receive(buf)
			rx.Free(buf[:n])
			got += n
			if n > 0 {
				break
			}
			d := time.Since(t0)
			if d > wakeBound {
				state := wakeState(r)
				r.a.Kick()
				r.b.Kick()
				late := recvAll(t, r.hostB, 1, wakeBound, nil)
				t.Fatalf("round %d (kind %d): the frame did not come out in %v; state %s; after a Kick of both engines %d came out (1: a lost wake-up)", round, kind, wakeBound, state, late)
			}
			if d < time.Millisecond {
				runtime.Gosched()
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
		if got != 1 {
			t.Fatalf("round %d: %d frames came out, want 1", round, got)
		}
		if time.Since(t0) > 50*time.Millisecond {
			slow[kind]++
		}
	}
	t.Logf("%d rounds by kind %v; over 50 ms (the machine's scheduling, not a failure) %v", rounds, kinds, slow)
}

// wakeState describes the rig's workers and the frames on each hop, for a
// round that failed.
func wakeState(r *rig) string {
	w := func(e *Engine) string {
		x := e.workers[0]
		return fmt.Sprintf("{quiet %#x tid %d}", x.quiet.v.Load(), x.tid.Load())
	}
	return fmt.Sprintf("worker A %s, worker B %s, running %d, claimed %d, GOMAXPROCS %d; hostA tx %d, lanA rx %d, wanA tx %d, wanB rx %d, lanB tx %d, hostB rx %d",
		w(r.a), w(r.b), runningWorkers.Load(), claimedProcs.Load(), runtime.GOMAXPROCS(0),
		r.hostA.Stats().TXPackets, r.lanA.Stats().RXPackets, r.wanA.Stats().TXPackets,
		r.wanB.Stats().RXPackets, r.lanB.Stats().TXPackets, r.hostB.Stats().RXPackets)
}
