package fastpath

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
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

// TestWorkersShareWhenOversubscribed: with more workers in the process
// than Go has Ps, every worker runs as an ordinary goroutine (no OS thread
// of its own: WorkerThreads reports 0) and traffic still crosses; once
// there are Ps enough, the workers own their threads again. The workers
// look at the count at each publish interval and before each sleep, so
// the test waits (up to 10 s, far beyond what a healthy run takes) for the
// mode to settle rather than timing it.
func TestWorkersShareWhenOversubscribed(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	r := newRig(t, rigConfig{queues: 2, start: true}) // 4 workers
	threads := func() []int { return append(r.a.WorkerThreads(), r.b.WorkerThreads()...) }
	settle := func(owned bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := 0
			for _, tid := range threads() {
				if tid != 0 {
					n++
				}
			}
			if (owned && n == 4) || (!owned && n == 0) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOMAXPROCS %d, 4 workers: worker threads %v, want every worker %s", runtime.GOMAXPROCS(0), threads(), map[bool]string{true: "on its own thread", false: "shared (0)"}[owned])
			}
			r.a.Kick() // wake the workers so that they look again
			r.b.Kick()
			time.Sleep(time.Millisecond)
		}
	}
	cross := func() {
		t.Helper()
		tx := r.hostA.Queue(0).TX()
		var frames []dataplane.Frame
		for i := range 64 {
			frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, uint16(1000+i), 2000, seqPayload(uint32(i), 32)))
		}
		sendAll(t, r.hostA, 0, frames)
		if got := recvAll(t, r.hostB, 64, 10*time.Second, nil); got != 64 {
			t.Fatalf("GOMAXPROCS %d: %d of 64 packets crossed", runtime.GOMAXPROCS(0), got)
		}
	}
	settle(false)
	cross()
	runtime.GOMAXPROCS(max(old, 4))
	settle(true)
	cross()
}

// TestShareConfig: an engine with Config.Share runs its workers shared
// (WorkerThreads reports 0) even with a P for every worker of the process,
// while another engine beside it owns its threads, and traffic crosses
// both. Waits for the mode as TestWorkersShareWhenOversubscribed does.
func TestShareConfig(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	r := newRig(t, rigConfig{})
	r.a.cfg.Share = true
	r.a.Start()
	r.b.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, b := r.a.WorkerThreads(), r.b.WorkerThreads()
		if a[0] == 0 && b[0] != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker threads: A (Share) %v, want 0; B %v, want its own", a, b)
		}
		r.a.Kick()
		r.b.Kick()
		time.Sleep(time.Millisecond)
	}
	tx := r.hostA.Queue(0).TX()
	var frames []dataplane.Frame
	for i := range 64 {
		frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, uint16(1000+i), 2000, seqPayload(uint32(i), 32)))
	}
	sendAll(t, r.hostA, 0, frames)
	if got := recvAll(t, r.hostB, 64, 10*time.Second, nil); got != 64 {
		t.Fatalf("%d of 64 packets crossed", got)
	}
}
