//go:build !linux

package fastpath

import (
	"fmt"
	"runtime"

	"github.com/wgpio/wgpio/dataplane"
)

// affinity is empty: there is no affinity to save where workers are not
// pinned.
type affinity struct{}

// threadID returns 0: no thread ID is read here (Engine.WorkerThreads).
func threadID() int32 { return 0 }

// pinCPU never pins (checkCPUs refused Config.CPUs).
func pinCPU(int, *affinity) bool { return false }

// unpinCPU has nothing to restore.
func unpinCPU(*affinity) bool { return true }

// checkCPUs refuses Config.CPUs: pinning a thread is sched_setaffinity(2),
// Linux only.
func checkCPUs(cpus []int) error {
	return fmt.Errorf("fastpath: Config.CPUs %v: pinning workers to CPUs is not supported on %s (leave it empty): %w", cpus, runtime.GOOS, dataplane.ErrNotSupported)
}
