// Package threadns tells whether the calling OS thread was moved into
// another network namespace than the one the process started in (setns on
// a locked thread, as embedders, the demo and the tests do), so that work
// later done on other threads can be pointed at the caller's namespace.
package threadns

import "github.com/vishvananda/netns"

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
