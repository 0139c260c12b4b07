package fastpath

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinnedWorkerAffinityStaysWithWorker: a worker pinned by Config.CPUs
// must not hand its one-CPU affinity to other goroutines when it exits
// (the regression: the worker unlocked its OS thread, which went back to
// the runtime's pool still pinned, and later goroutines, including a
// second engine's CPU validation, ran on one CPU).
func TestPinnedWorkerAffinityStaysWithWorker(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if all.Count() < 2 {
		t.Logf("this process may run on one CPU only: pinning cannot narrow it (the test passes vacuously)")
		return
	}
	cpu := -1
	for c := 0; c < 1024 && cpu < 0; c++ {
		if all.IsSet(c) {
			cpu = c
		}
	}
	for i := 0; i < 3; i++ {
		r := newRig(t, rigConfig{})
		r.a.cfg.CPUs = []int{cpu}
		r.a.Start()
		r.a.Close()
	}
	// Run many goroutines on their own threads at once: an idle thread
	// left pinned in the pool would be handed to one of them.
	n := 8 * runtime.GOMAXPROCS(0)
	var wg, hold sync.WaitGroup
	hold.Add(1)
	counts := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err == nil {
				counts[i] = set.Count()
			}
			hold.Wait()
		}()
	}
	hold.Done()
	wg.Wait()
	for i, c := range counts {
		if c != all.Count() {
			t.Fatalf("goroutine %d ran on a thread allowed %d CPUs, want the process's %d (a pinned worker thread leaked)", i, c, all.Count())
		}
	}
}
