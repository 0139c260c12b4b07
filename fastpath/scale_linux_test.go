package fastpath

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
)

// pinThread pins the calling goroutine's OS thread to cpu (best effort).
func pinThread(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	unix.SchedSetaffinity(0, &set)
}

// threadCtxSwitches reads a thread's voluntary + involuntary context
// switches from /proc.
func threadCtxSwitches(tid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "voluntary_ctxt_switches:") || strings.HasPrefix(line, "nonvoluntary_ctxt_switches:") {
			f := strings.Fields(line)
			v, _ := strconv.ParseUint(f[len(f)-1], 10, 64)
			total += v
		}
	}
	return total, nil
}

// BenchmarkContextSwitches offers packets to a running engine (gateway A,
// one worker pinned to CPU 1, started as in production) from a feeder
// pinned to CPU 0 that also drains the WAN, in bursts of 64 as fast as the
// rings take them, and reports the worker thread's context switches per
// forwarded packet. Target ≤ 0.01.
func BenchmarkContextSwitches(b *testing.B) {
	r := newRig(b, rigConfig{})
	r.a.cfg.CPUs = []int{1}
	r.a.Start()
	tmpl := templateFrame(b, r, 22)
	pinThread(0)
	defer runtime.UnlockOSThread()
	frames := make([]dataplane.Frame, 64)
	tx := r.hostA.Queue(0).TX()
	wrx := r.wanB.Queue(0).RX()
	feed := func() {
		n := tx.Alloc(frames)
		for i := 0; i < n; i++ {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		sent := tx.Transmit(frames[:n])
		tx.Free(frames[sent:n])
	}
	feed()
	time.Sleep(20 * time.Millisecond)
	tid := r.a.WorkerThreads()[0]
	if tid == 0 {
		testenv.Missing(b, "a worker thread of its own (the worker is shared: more workers than GOMAXPROCS, fastpath/threads.go)", "run with GOMAXPROCS of at least 1 per worker")
	}
	n := max(b.N, 1_000_000)
	b.ResetTimer()
	before, err := threadCtxSwitches(tid)
	if err != nil {
		b.Fatal(err)
	}
	delivered := 0
	t0 := time.Now()
	for delivered < n && time.Since(t0) < 60*time.Second {
		feed()
		m := wrx.Receive(frames)
		wrx.Free(frames[:m])
		delivered += m
	}
	after, _ := threadCtxSwitches(tid)
	b.ReportMetric(float64(after-before)/float64(delivered), "ctxsw/pkt")
	b.ReportMetric(float64(delivered)/time.Since(t0).Seconds(), "pps")
}
