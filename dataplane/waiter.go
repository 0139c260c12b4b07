package dataplane

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/wakefd"
)

// Notifier is implemented by the RX halves of in-process backends
// (memport), whose transmitters run in the same Go program: after Arm they
// can wake their owner with a non-blocking send on a Go channel instead of
// a write to WaitFD. A Waiter whose halves are all Notifiers parks its
// goroutine in the Go scheduler instead of in poll(2): sleeping and waking
// cost no system call, the P is free for other goroutines at once, and the
// woken goroutine runs next on the waker's P (with the frames still in that
// CPU's cache), as a goroutine woken by a channel does.
type Notifier interface {
	// Notify makes the wake-up that Arm asks for a non-blocking send on
	// ch instead of a write to WaitFD (nil: WaitFD again). The owner
	// calls it before Arm; the port's closing sends on ch too.
	Notify(ch chan struct{})
}

// Waiter blocks its owner until one of several RX halves (of any ports and
// backends) may have frames, or another goroutine rings the doorbell, or a
// timeout passes. It is poll(2) over the halves' WaitFDs plus a doorbell
// descriptor (an eventfd on Linux, a pipe elsewhere: internal/wakefd);
// when every half is a Notifier (memport), a receive on a Go channel that
// the halves and the doorbell send on (Parks reports which).
//
// Add, Remove, Wait and Close belong to one owner goroutine; Ring is safe for
// concurrent use from any goroutine, but not after Close (the doorbell's
// number may be reused by then).
type Waiter struct {
	rxs  []RX
	fds  []unix.PollFd // fds[0] is the doorbell's read end
	bell atomic.Int32  // the doorbell's write end (on Linux the same eventfd); -1 after Close
	// ch is the channel mode's wake-up (the halves send on it); bellCh
	// the doorbell's token, sent in both modes, so that a ring is never
	// lost when Add changes the mode. One token each at most.
	ch, bellCh chan struct{}
	parks      atomic.Bool // every RX is a Notifier: Wait receives on ch
	timer      *time.Timer // channel mode's timeout, reused (nil until needed)
}

// NewWaiter returns a waiter with a doorbell and no queues.
func NewWaiter() (*Waiter, error) {
	r, wfd, err := wakefd.New()
	if err != nil {
		return nil, fmt.Errorf("create doorbell: %w", err)
	}
	w := &Waiter{fds: []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}, ch: make(chan struct{}, 1), bellCh: make(chan struct{}, 1)}
	w.bell.Store(int32(wfd))
	return w, nil
}

// Add makes Wait return when rx may have frames. A half whose port is
// closed (before Add or after) makes every Wait return at once: with an
// error wrapping ErrClosed if the half is a PortCloser, else as a
// spurious return (an RX whose WaitFD is negative when added is polled but
// never wakes it). Remove a half before its port closes. Adding a half
// that is not a Notifier puts the waiter (back) in poll mode.
func (w *Waiter) Add(rx RX) {
	w.rxs = append(w.rxs, rx)
	w.fds = append(w.fds, unix.PollFd{Fd: int32(rx.WaitFD()), Events: unix.POLLIN})
	w.setMode()
}

// Remove stops Wait from waiting on rx, added before (Add), and reports
// whether it was; the owner calls it before rx's port closes.
func (w *Waiter) Remove(rx RX) bool {
	for i, r := range w.rxs {
		if r == rx {
			w.rxs = append(w.rxs[:i], w.rxs[i+1:]...)
			w.fds = append(w.fds[:i+1], w.fds[i+2:]...) // fds[0] is the doorbell
			if n, ok := rx.(Notifier); ok {
				n.Notify(nil)
			}
			w.setMode()
			return true
		}
	}
	return false
}

// setMode parks (channel mode) when every half is a Notifier, and tells
// the Notifiers where to send.
func (w *Waiter) setMode() {
	parks := true
	for _, r := range w.rxs {
		if _, ok := r.(Notifier); !ok {
			parks = false
		}
	}
	for _, r := range w.rxs {
		if n, ok := r.(Notifier); ok {
			if parks {
				n.Notify(w.ch)
			} else {
				n.Notify(nil)
			}
		}
	}
	w.parks.Store(parks)
}

// Parks reports whether Wait parks the goroutine in the Go scheduler
// (every half is a Notifier) rather than its thread in poll(2): blocking
// then costs about as much as a channel receive, so a caller may block as
// soon as it finds nothing instead of spinning first.
func (w *Waiter) Parks() bool { return w.parks.Load() }

// Ring wakes the owner's current or next Wait. Safe for concurrent use.
func (w *Waiter) Ring() {
	fd := w.bell.Load()
	if fd < 0 {
		return
	}
	select {
	case w.bellCh <- struct{}{}:
	default:
	}
	if w.parks.Load() {
		return
	}
	// Fails only when the bell is already ringing (EAGAIN).
	wakefd.Signal(int(fd))
}

// Wait blocks until an added RX half may have frames, the doorbell rings or
// timeout passes (Forever: no timeout; 0: just check). It returns rang = true
// if the doorbell rang (and clears it). Spurious returns are allowed: the
// caller polls every half after Wait returns. In channel mode it allocates
// nothing after the first call with a timeout. After Close, or once the
// port of a half that is a PortCloser is closed, it returns at once an
// error wrapping ErrClosed that says which.
func (w *Waiter) Wait(timeout time.Duration) (rang bool, err error) {
	if w.bell.Load() < 0 {
		return false, errWaiterClosed
	}
	for _, rx := range w.rxs {
		if !rx.Arm() {
			timeout = 0
		}
		if c, ok := rx.(PortCloser); ok && c.PortClosed() {
			return false, errPortClosedUnder
		}
	}
	if w.parks.Load() {
		return w.park(timeout), nil
	}
	select {
	case <-w.bellCh: // rung (in either mode); the doorbell is drained below
		rang = true
		timeout = 0
	default:
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
		wakefd.Drain(int(w.fds[0].Fd))
		// Ring sent the token before it wrote the doorbell.
		select {
		case <-w.bellCh:
		default:
		}
		rang = true
	}
	return rang, nil
}

// park is Wait in channel mode, the halves armed: receive a half's
// wake-up or the doorbell's token, or time out.
func (w *Waiter) park(timeout time.Duration) (rang bool) {
	switch {
	case timeout == 0:
		select {
		case <-w.bellCh:
			return true
		default:
			return false
		}
	case timeout < 0:
		select {
		case <-w.ch:
			return false
		case <-w.bellCh:
			return true
		}
	}
	if w.timer == nil {
		w.timer = time.NewTimer(timeout)
	} else {
		w.timer.Reset(timeout)
	}
	select {
	case <-w.ch:
	case <-w.bellCh:
		rang = true
	case <-w.timer.C:
		return false
	}
	w.timer.Stop()
	return rang
}

// The errors of a closed waiter's Wait and Close, and of a Wait on a half
// whose port was closed under it.
var (
	errWaiterClosed    = fmt.Errorf("dataplane: waiter closed: %w", ErrClosed)
	errPortClosedUnder = fmt.Errorf("dataplane: the port of a queue the waiter waits on was closed (close or Remove the queue's owner first): %w", ErrClosed)
)

// Close releases the doorbell. The RX halves are not touched. A second
// Close returns an error wrapping ErrClosed.
func (w *Waiter) Close() error {
	fd := w.bell.Swap(-1)
	if fd < 0 {
		return errWaiterClosed
	}
	if err := wakefd.Close(int(w.fds[0].Fd), int(fd)); err != nil {
		return fmt.Errorf("close doorbell: %w", err)
	}
	return nil
}
