package dataplane

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Waiter blocks its owner until one of several RX halves (of any ports and
// backends) may have frames, or another goroutine rings the doorbell, or a
// timeout passes. It is poll(2) over the halves' WaitFDs plus an eventfd.
//
// Add, Wait and Close belong to one owner goroutine; Ring is safe for
// concurrent use from any goroutine, but not after Close (the eventfd's
// number may be reused by then).
type Waiter struct {
	rxs  []RX
	fds  []unix.PollFd // fds[0] is the doorbell
	bell atomic.Int32  // eventfd; -1 after Close
}

// NewWaiter returns a waiter with a doorbell and no queues.
func NewWaiter() (*Waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create doorbell: %w", os.NewSyscallError("eventfd", err))
	}
	w := &Waiter{fds: []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}
	w.bell.Store(int32(fd))
	return w, nil
}

// Add makes Wait return when rx may have frames. An RX whose WaitFD is
// negative (a closed port) is polled by Wait but never wakes it.
func (w *Waiter) Add(rx RX) {
	w.rxs = append(w.rxs, rx)
	w.fds = append(w.fds, unix.PollFd{Fd: int32(rx.WaitFD()), Events: unix.POLLIN})
}

// Ring wakes the owner's current or next Wait. Safe for concurrent use.
func (w *Waiter) Ring() {
	fd := w.bell.Load()
	if fd < 0 {
		return
	}
	// An eventfd write of 1 fails only when the counter would overflow
	// (EAGAIN), in which case the bell is already ringing.
	one := [8]byte{1}
	_, _ = unix.Write(int(fd), one[:])
}

// Wait blocks until an added RX half may have frames, the doorbell rings or
// timeout passes (Forever: no timeout; 0: just check). It returns rang = true
// if the doorbell rang (and clears it). Spurious returns are allowed: the
// caller polls every half after Wait returns.
func (w *Waiter) Wait(timeout time.Duration) (rang bool, err error) {
	if w.bell.Load() < 0 {
		return false, ErrClosed
	}
	for _, rx := range w.rxs {
		if !rx.Arm() {
			timeout = 0
		}
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	for i := range w.fds {
		w.fds[i].Revents = 0
	}
	for {
		_, err = unix.Poll(w.fds, ms)
		if err == unix.EINTR {
			continue
		}
		break
	}
	if err != nil {
		return false, os.NewSyscallError("poll", err)
	}
	if w.fds[0].Revents&unix.POLLIN != 0 {
		var buf [8]byte
		_, _ = unix.Read(int(w.bell.Load()), buf[:])
		rang = true
	}
	return rang, nil
}

// Close releases the doorbell. The RX halves are not touched. A second
// Close returns ErrClosed.
func (w *Waiter) Close() error {
	fd := w.bell.Swap(-1)
	if fd < 0 {
		return ErrClosed
	}
	if err := unix.Close(int(fd)); err != nil {
		return fmt.Errorf("close doorbell: %w", os.NewSyscallError("close", err))
	}
	return nil
}
