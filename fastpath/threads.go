package fastpath

import (
	"runtime"
	"sync/atomic"
)

// Thread policy (ARCHITECTURE.md, Threading model).
//
// A worker that has a CPU to itself owns an OS thread
// (runtime.LockOSThread), pinned to Config.CPUs when given, and busy-polls
// for an adaptive spin (Config.IdleSpin) after its last work: at high rates
// it never sleeps, and it pays no wake-up per burst.
//
// When the process runs more workers (of every engine in it) than Go has
// Ps (GOMAXPROCS), counting as workers the Ps that other busy goroutines
// claim (ClaimProcs: a gateway's handshake pool in a storm), that is
// wrong twice over. A spinning worker holds a P
// that another worker, the control plane or the embedding program (in the
// in-process bench: the generator and the sink) is waiting for, until it
// blocks or Go preempts it (every 10 ms), so rings overflow at rates the
// workers could carry; and a locked goroutine cannot yield cheaply: every
// Gosched or park hands its P to another thread and sleeps on a futex, and
// every wake-up pays the same back. Such a worker is "shared": it runs as
// an ordinary goroutine (unlocked, unpinned; its thread's affinity is
// restored first), yields to other goroutines (runtime.Gosched) while it
// finds nothing, for at most sharedSpin, then blocks in its Waiter — which
// on memport parks the goroutine in the Go scheduler, so that the wake-up
// readies it on the waker's P.
//
// Each worker looks at the count at every publish interval and when it is
// about to block, so engines started and closed later move it between the
// two modes.

// runningWorkers counts the workers running in this process, of every
// engine.
var runningWorkers atomic.Int32

// claimedProcs counts the Ps that other goroutines of this process keep
// busy for now (ClaimProcs); the thread policy counts them as workers.
var claimedProcs atomic.Int32

// ClaimProcs adds n (negative: gives back) to the Ps that goroutines of
// this process other than the workers keep busy for now, as a gateway's
// handshake workers do through a reconnect storm (gateway/pool.go). The
// thread policy counts the claims as workers: while workers and claims
// together exceed GOMAXPROCS, every worker is shared. A worker that owns
// its locked thread while the other goroutines keep every P busy costs
// them a P more than its work: each wake-up hands a P from their thread to
// the worker's and back (two futex hand-offs, the P idle in between), and
// the worker holds it while it spins after its work. Measured with one
// worker on memport and two handshake workers on two CPUs
// (bench/scale, handshake part): two goroutines ran 33 % of the time
// with the worker owned, 83 % with it shared. Safe for concurrent use;
// each worker looks at the claims at its next publish interval or
// wake-up. (Config.Share makes an engine's workers shared always.)
func ClaimProcs(n int) { claimedProcs.Add(int32(n)) }

// sharedSpin is how long a shared worker keeps yielding after its last
// work before it blocks, ns: a few passes of the other goroutines.
const sharedSpin = 5_000

// oversubscribed reports whether the process runs more workers, with the
// Ps claimed by other work (ClaimProcs), than Go has Ps.
// runtime.GOMAXPROCS takes the scheduler's lock: call it per publish
// interval or per sleep, not per turn.
func oversubscribed() bool {
	return int(runningWorkers.Load())+int(claimedProcs.Load()) > runtime.GOMAXPROCS(0)
}

// thread is a worker's OS-thread state; owned by the worker's goroutine.
type thread struct {
	locked bool
	pinned bool
	orig   affinity // the thread's affinity before pinning
}

// own locks the worker to its OS thread and pins it to its CPU (if
// Config.CPUs is set; best effort, as documented there).
func (w *worker) own() {
	if w.th.locked {
		return
	}
	runtime.LockOSThread()
	w.th.locked = true
	w.tid.Store(threadID())
	if cpus := w.e.cfg.CPUs; len(cpus) > 0 {
		w.th.pinned = pinCPU(cpus[w.id%len(cpus)], &w.th.orig)
	}
}

// share gives the worker's OS thread back to the Go scheduler, with the
// affinity it had before own pinned it.
func (w *worker) share() {
	if !w.th.locked {
		return
	}
	if w.th.pinned {
		if !unpinCPU(&w.th.orig) {
			// The thread cannot get its old affinity back: keep it
			// locked, so that the runtime ends it with the worker
			// instead of handing its narrowed affinity to other
			// goroutines.
			return
		}
		w.th.pinned = false
	}
	w.tid.Store(0)
	runtime.UnlockOSThread()
	w.th.locked = false
}

// placeThread picks the mode for the current worker count: shared (see
// above) or owning its thread. It returns whether the worker is shared.
func (w *worker) placeThread() bool {
	if w.e.cfg.Share || oversubscribed() {
		w.share()
		return !w.th.locked
	}
	w.own()
	return false
}
