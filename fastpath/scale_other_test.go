//go:build !linux

package fastpath

import "runtime"

// pinThread locks the calling goroutine to its OS thread; it pins nothing
// here (sched_setaffinity(2) is Linux's), so the rates of runPinned are
// those of threads the system places.
func pinThread(int) { runtime.LockOSThread() }
