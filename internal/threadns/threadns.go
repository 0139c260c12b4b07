//go:build linux

package threadns

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// start names (dev:inode) the network namespace the process's threads
// started in. Package initialisation runs on the main thread, locked to it
// and before the program can have moved a thread, so this is the namespace
// of every thread nobody moved. It is not /proc/self/ns/net: that is the
// main thread's namespace now, and a goroutine that moved its thread may be
// running on the main thread.
var start = func() string {
	h, err := netns.Get()
	if err != nil {
		return ""
	}
	defer h.Close()
	return h.UniqueId()
}()

// Moved returns a handle on the calling thread's network namespace if it is
// not the one the process started in (or that one is unknown), which the
// caller owns and closes; else netns.None(), so that a process in its own
// namespace needs no setns (CAP_SYS_ADMIN) later. Call it on a locked
// thread. The error is netns.Get's.
func Moved() (netns.NsHandle, error) {
	h, err := netns.Get()
	if err != nil {
		return netns.None(), err
	}
	if start != "" && h.UniqueId() == start {
		h.Close()
		return netns.None(), nil
	}
	return h, nil
}

// Do runs fn on a thread in the network namespace ns (one Moved returned),
// or on the calling one when ns is not open (netns.None: the process's
// own). The thread is locked while it is in ns and goes back to its
// namespace after fn; a thread that cannot go back stays locked and ends
// with its goroutine.
func Do(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter the gateway's network namespace: %w", err)
	}
	defer func() {
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}
