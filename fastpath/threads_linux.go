package fastpath

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// affinity is a thread's CPU affinity mask (sched_getaffinity(2)).
type affinity = unix.CPUSet

// threadID returns the calling OS thread's ID (gettid(2)), for
// Engine.WorkerThreads.
func threadID() int32 { return int32(unix.Gettid()) }

// pinCPU saves the calling thread's affinity in orig and pins the
// thread to cpu. It reports whether the thread is pinned (best effort:
// Config.CPUs).
func pinCPU(cpu int, orig *affinity) bool {
	if unix.SchedGetaffinity(0, orig) != nil {
		return false
	}
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) == nil
}

// unpinCPU gives the calling thread back the affinity pinCPU saved
// and reports whether it could.
func unpinCPU(orig *affinity) bool { return unix.SchedSetaffinity(0, orig) == nil }

// checkCPUs checks that the process may run on every CPU of Config.CPUs.
func checkCPUs(cpus []int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("fastpath: read CPU affinity: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	for _, c := range cpus {
		if c < 0 || !set.IsSet(c) {
			return fmt.Errorf("fastpath: CPU %d is not one this process may run on (allowed: %s)", c, cpuList(&set))
		}
	}
	return nil
}

// cpuList formats a CPU set as "0,1,3".
func cpuList(set *unix.CPUSet) string {
	var out []string
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, strconv.Itoa(c))
		}
	}
	return strings.Join(out, ",")
}
