package dataplane

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Waiter blocks its owner until one of several RX halves (of any ports and
// backends) may have frames, or another goroutine rings the doorbell, or a
// timeout passes. It is poll(2) over the halves' WaitFDs plus an eventfd.
//
// Add, Wait and Close belong to one owner goroutine; Ring is safe for
// concurrent use from any goroutine.
type Waiter struct {
	rxs  []RX
	fds  []unix.PollFd // fds[0] is the doorbell
	bell int
}

// NewWaiter returns a waiter with a doorbell and no queues.
func NewWaiter() (*Waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create doorbell: %w", os.NewSyscallError("eventfd", err))
	}
	return &Waiter{bell: fd, fds: []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}, nil
}

// Add makes Wait return when rx may have frames.
func (w *Waiter) Add(rx RX) {
	w.rxs = append(w.rxs, rx)
	w.fds = append(w.fds, unix.PollFd{Fd: int32(rx.WaitFD()), Events: unix.POLLIN})
}

// Ring wakes the owner's current or next Wait. Safe for concurrent use.
func (w *Waiter) Ring() {
	var one = [8]byte{1}
	_, _ = unix.Write(w.bell, one[:])
}

// Wait blocks until an added RX half may have frames, the doorbell rings or
// timeout passes (Forever: no timeout; 0: just check). It returns rang = true
// if the doorbell rang (and clears it). Spurious returns are allowed: the
// caller polls every half after Wait returns.
func (w *Waiter) Wait(timeout time.Duration) (rang bool, err error) {
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
		_, _ = unix.Read(w.bell, buf[:])
		rang = true
	}
	return rang, nil
}

// Close releases the doorbell. The RX halves are not touched.
func (w *Waiter) Close() error {
	return unix.Close(w.bell)
}
