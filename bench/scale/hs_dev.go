//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Developer aids of the handshake part, off unless set in the environment
// (they change no figure):
//
//	WGPIO_SCALE_HS=resp,storm,timers  run only those of the part's three measurements
//	WGPIO_SCALE_HS_PROFILE=dir        write a CPU profile and an execution trace
//	                                  (runtime/trace: scheduling latency) of each
//	                                  measured phase into dir (resp1, resp2, storm)
//	WGPIO_SCALE_HS_TIMELINE=1         print the storm's progress every 250 ms

// hsWant reports whether measurement name is to run.
func hsWant(name string) bool {
	v := os.Getenv("WGPIO_SCALE_HS")
	return v == "" || strings.Contains(v, name)
}

// hsProfile starts the profile and trace of phase name, if asked for, and
// returns the function that stops them.
func hsProfile(e *env, name string) func() {
	dir := os.Getenv("WGPIO_SCALE_HS_PROFILE")
	if dir == "" {
		return func() {}
	}
	cpu, err := os.Create(filepath.Join(dir, name+".cpu"))
	if err != nil {
		e.Logf("handshake: profile: %v", err)
		return func() {}
	}
	tr, err := os.Create(filepath.Join(dir, name+".trace"))
	if err != nil {
		cpu.Close()
		e.Logf("handshake: trace: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		e.Logf("handshake: profile: %v", err)
	}
	if err := trace.Start(tr); err != nil {
		e.Logf("handshake: trace: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		trace.Stop()
		cpu.Close()
		tr.Close()
	}
}

func hsTimeline() bool { return os.Getenv("WGPIO_SCALE_HS_TIMELINE") != "" }

// hsCPU is the CPU time of the process and of the threads tids (the
// engine's workers), and those threads' voluntary context switches.
type hsCPU struct {
	process, threads time.Duration
	switches         int
	wall             time.Duration // the span measured (set by the caller)
	owned            bool          // threads is meaningful (set by the caller)
}

func hsCPUNow(tids []int) hsCPU {
	var c hsCPU
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, tid := range tids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid)); err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
				f := strings.Fields(s[i+2:])
				if len(f) > 12 {
					u, _ := strconv.Atoi(f[11]) // utime, clock ticks (USER_HZ, 100)
					k, _ := strconv.Atoi(f[12]) // stime
					c.threads += time.Duration(u+k) * 10 * time.Millisecond
				}
			}
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid)); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(v))
					c.switches += n
				}
			}
		}
	}
	return c
}

func (c hsCPU) sub(o hsCPU) hsCPU {
	return hsCPU{process: c.process - o.process, threads: c.threads - o.threads, switches: c.switches - o.switches}
}
