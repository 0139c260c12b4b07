package fastpath

import (
	"sync"
	"sync/atomic"
)

// Retiring keypairs: the grace period between a keypair leaving the control
// plane's hands and the erasure of its keys.
//
// A worker reads a keypair from its peer's slots or the index table during a
// loop turn and drops every reference to it by the end of that turn (outbound
// peerOf and burstKP, inbound rxMeta.kp are cleared per batch). So once
// the control plane has taken a keypair out of the slots and the index table,
// a worker can still be using it only if it was inside a turn that began
// before then. Each worker publishes its state once per loop turn (one atomic
// store, never per packet): an even turn number while it runs a turn, odd
// while it is parked in its Waiter (or not running), holding no keypair.
// Retiring takes a snapshot of those states; the keys may be erased once every
// worker has either been parked at the snapshot, or has published anything
// else since (it began a later turn, or parked). This is an epoch scheme in
// the manner of RCU's quiescent states, with the batch boundary as the
// quiescent point.

// quiescence is a worker's published turn state, on a cache line of its own:
// the worker writes it every loop turn, the control plane reads it only when
// it retires or reaps.
type quiescence struct {
	_ [64]byte
	v atomic.Uint64 // even: in turn v; odd: parked (holds no keypair)
	_ [56]byte
}

// beginTurn publishes that the worker starts a new loop turn, in which it may
// load keypairs. One atomic store per turn.
func (w *worker) beginTurn() {
	w.turn += 2
	w.quiet.v.Store(w.turn)
}

// park publishes that the worker holds no keypair until its next beginTurn:
// called before it blocks in its Waiter and when it stops.
func (w *worker) park() { w.quiet.v.Store(w.turn | 1) }

// retireReapEvery is how many keypairs Retire queues between the reaps it
// runs itself (besides the control plane's periodic Reap), so that a burst of
// retirements (every peer removed at once) neither reads every worker's state
// per keypair nor lets the queue grow while erasable keypairs wait.
const retireReapEvery = 256

// retirer is the engine's queue of keypairs waiting for their keys to be
// erased. Two generations: waiting shares one snapshot of the workers'
// states, fresh was retired after it was taken and gets the next snapshot.
type retirer struct {
	mu      sync.Mutex
	waiting []*Keypair
	snap    []uint64
	fresh   []*Keypair
}

// Retire ends kp's use: it marks kp dead at once (Dead reports true, workers
// stop using it) and erases its keys (chachapoly.Key.Zero, send and
// receive) and clears its replay window once no worker can still be using
// it (a burst opened before the retirement is still checked against the
// whole window): when every worker has passed a batch boundary since, or was parked.
// With idle (parked) workers that happens before Retire returns; otherwise
// at a later Retire or Reap (the control plane calls Reap on its tick, every
// PublishInterval), or at Close.
//
// The caller must have unpublished kp first: taken it out of its peer's
// slots (Current, Previous, Next) and freed its index in Indexes, so that no
// worker can load it again. Whitepaper §6.3: keys are erased when the session
// is discarded. Safe for concurrent use; retiring a keypair twice is harmless.
// kp must not be nil (it panics).
func (e *Engine) Retire(kp *Keypair) {
	kp.kill()
	r := &e.retire
	r.mu.Lock()
	r.fresh = append(r.fresh, kp)
	if len(r.fresh)%retireReapEvery == 1 {
		e.reapLocked()
	}
	r.mu.Unlock()
}

// Reap erases the keys of retired keypairs whose grace period has ended and
// returns how many retired keypairs still wait. It reads each worker's state
// once or twice; the control plane calls it on its tick. Safe for concurrent
// use.
func (e *Engine) Reap() (pending int) {
	r := &e.retire
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.reapLocked()
}

func (e *Engine) reapLocked() int {
	r := &e.retire
	if len(r.waiting) > 0 && e.passed(r.snap) {
		eraseAll(r.waiting)
		r.waiting = r.waiting[:0]
	}
	if len(r.waiting) == 0 && len(r.fresh) > 0 {
		// The fresh keypairs are unpublished and dead: a snapshot taken
		// now covers them (atomics are sequentially consistent, so a
		// turn published after this read loads the slots as they are now).
		r.waiting, r.fresh = r.fresh, r.waiting
		r.snap = r.snap[:0]
		for _, w := range e.workers {
			r.snap = append(r.snap, w.quiet.v.Load())
		}
		if e.passed(r.snap) {
			eraseAll(r.waiting)
			r.waiting = r.waiting[:0]
		}
	}
	// Shrink a queue a mass retirement grew, so that it does not hold
	// that memory for good.
	if cap(r.waiting) > 4*retireReapEvery && len(r.waiting) == 0 {
		r.waiting = nil
	}
	if cap(r.fresh) > 4*retireReapEvery && len(r.fresh) == 0 {
		r.fresh = nil
	}
	return len(r.waiting) + len(r.fresh)
}

// passed reports whether every worker is past the snapshot: parked then, or
// having published another state since.
func (e *Engine) passed(snap []uint64) bool {
	for i, w := range e.workers {
		if s := snap[i]; s&1 == 0 && w.quiet.v.Load() == s {
			return false
		}
	}
	return true
}

func eraseAll(kps []*Keypair) {
	for i, kp := range kps {
		kp.Zero()
		kps[i] = nil
	}
}
