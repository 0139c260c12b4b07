package fastpath

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestClaimProcsSharesWorkers: Ps claimed by other busy work (a gateway's
// handshake pool in a storm) count as workers: with every P claimed, the
// workers give up their locked threads at their next wake-up.
func TestClaimProcsSharesWorkers(t *testing.T) {
	r := newRig(t, rigConfig{start: true})
	deadline := time.Now().Add(10 * time.Second)
	for runningWorkers.Load() < 2 { // the rig's two workers have started
		if time.Now().After(deadline) {
			t.Fatalf("%d workers running", runningWorkers.Load())
		}
		time.Sleep(time.Millisecond)
	}
	n := runtime.GOMAXPROCS(0)
	ClaimProcs(n)
	defer ClaimProcs(-n)
	if !oversubscribed() {
		t.Fatalf("%d Ps claimed of %d, %d workers running: not oversubscribed", n, n, runningWorkers.Load())
	}
	for {
		r.a.Kick()
		r.b.Kick()
		tids := append(r.a.WorkerThreads(), r.b.WorkerThreads()...)
		if !slices.ContainsFunc(tids, func(tid int) bool { return tid != 0 }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers still own threads %v with every P claimed", tids)
		}
		time.Sleep(time.Millisecond)
	}
}
