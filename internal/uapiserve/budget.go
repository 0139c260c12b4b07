package uapiserve

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds on the memory of get replies (Budget).
const (
	// ReplyLimit is how many bytes of get replies are held at once,
	// formatted and not yet taken by their clients; one reply of any
	// size is let through when no other is held.
	ReplyLimit = 64 << 20
	// ReplyWait is how long a get waits for room before it is answered
	// with errno EBUSY.
	ReplyWait = 5 * time.Second
	// ReplyStall is how long a client may leave its reply untaken while
	// another get waits for room: longer, and its connection is cut.
	// wg(8) reads its reply at once.
	ReplyStall = time.Second
)

// monoBase makes WriteState's times monotonic.
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) }

// WriteState is what a connection's reply writer (a stall writer) tells a
// Budget of the client's progress, and what the Budget tells it back: the
// reply is cut. One per connection; safe for concurrent use.
type WriteState struct {
	moved atomic.Int64 // monoNow of the last piece of a reply taken, or of a Write's start; -1: formatting
	cut   atomic.Bool
}

// ErrReplyCut is the write error of a reply that a Budget cut
// (WriteState.Check).
var ErrReplyCut = fmt.Errorf("client took none of its get reply for %v while other gets waited for room: cut", ReplyStall)

// Moved records that the client took a piece of its reply (or that a
// reply starts): it is not stalled.
func (s *WriteState) Moved() { s.moved.Store(monoNow()) }

// Check returns ErrReplyCut once the reply was cut. A writer calls it
// after it set its write deadline and before it writes: a cut that comes
// after the check sets a deadline in the past, which wins.
func (s *WriteState) Check() error {
	if s.cut.Load() {
		return ErrReplyCut
	}
	return nil
}

// Budget bounds the bytes of get replies held at once on a UAPI socket:
// a reply is formatted whole (a consistent view of the device, as
// wireguard-go and the kernel give) and held until its client has taken
// it, which a client that never reads made 64 connections hold 1.5 GB of
// a gateway with a million allowed IPs. A get takes room for its reply
// (Acquire) before it formats it and gives it back when written
// (Release); at most Limit bytes are held (ReplyLimit by default), or
// one reply of any size. A get that finds no room waits up to ReplyWait,
// newest first (clients that stalled came before the `wg show` behind
// them), and meanwhile cuts the replies that their clients left untaken
// for ReplyStall; then it is answered EBUSY. The zero value is ready.
// Safe for concurrent use.
type Budget struct {
	// Limit is the bound in bytes; 0 is ReplyLimit. Set before use.
	Limit int

	mu      sync.Mutex
	held    int
	peak    int
	holds   map[*Hold]struct{}
	waiters []*Hold // oldest first
}

// Hold is the room of one get's reply.
type Hold struct {
	n       int
	conn    net.Conn
	st      *WriteState
	granted chan struct{} // closed when a waiter is given its room
}

func (b *Budget) limit() int {
	if b.Limit > 0 {
		return b.Limit
	}
	return ReplyLimit
}

// Peak returns the most bytes held at once so far.
func (b *Budget) Peak() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Held returns the bytes held now.
func (b *Budget) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

func (b *Budget) fitsLocked(n int) bool { return b.held == 0 || b.held+n <= b.limit() }

func (b *Budget) takeLocked(h *Hold) {
	b.held += h.n
	b.peak = max(b.peak, b.held)
	if b.holds == nil {
		b.holds = make(map[*Hold]struct{})
	}
	b.holds[h] = struct{}{}
	// Not cut while it is formatted (a second at a million peers): its
	// writer's first Write (Moved) starts the clock.
	h.st.moved.Store(-1)
}

// Acquire takes room for a reply of about n bytes for the client of conn,
// whose writer reports to st, waiting up to wait (ReplyWait if 0). The
// error is an *Error with errno EBUSY when no room came.
func (b *Budget) Acquire(n int, conn net.Conn, st *WriteState, wait time.Duration) (*Hold, error) {
	if wait <= 0 {
		wait = ReplyWait
	}
	st.cut.Store(false)
	h := &Hold{n: max(n, 1), conn: conn, st: st}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitsLocked(h.n) {
		b.takeLocked(h)
		b.mu.Unlock()
		return h, nil
	}
	h.granted = make(chan struct{})
	b.waiters = append(b.waiters, h)
	b.cutStalledLocked()
	b.grantLocked()
	b.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(ReplyStall / 4)
	defer tick.Stop()
	for {
		select {
		case <-h.granted:
			return h, nil
		case <-tick.C:
			b.mu.Lock()
			b.cutStalledLocked()
			b.mu.Unlock()
		case <-deadline.C:
			b.mu.Lock()
			select {
			case <-h.granted: // given room meanwhile
				b.mu.Unlock()
				return h, nil
			default:
			}
			b.waiters = slices.DeleteFunc(b.waiters, func(w *Hold) bool { return w == h })
			held, limit := b.held, b.limit()
			b.mu.Unlock()
			return nil, &Error{Code: -int64(syscall.EBUSY), Err: fmt.Errorf(
				"get: no room for its reply (about %d bytes) within %v: other replies hold %d bytes, at most %d at once (clients that read slowly or not at all)",
				n, wait, held, limit)}
		}
	}
}

// grantLocked gives room to the waiters that fit, newest first.
func (b *Budget) grantLocked() {
	for i := len(b.waiters) - 1; i >= 0; i-- {
		w := b.waiters[i]
		if !b.fitsLocked(w.n) {
			continue
		}
		b.takeLocked(w)
		close(w.granted)
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
}

// cutStalledLocked cuts the replies whose clients took nothing of them
// for ReplyStall, while gets wait for room.
func (b *Budget) cutStalledLocked() {
	now := monoNow()
	for h := range b.holds {
		if m := h.st.moved.Load(); m < 0 || now-m < int64(ReplyStall) || h.st.cut.Load() {
			continue
		}
		h.st.cut.Store(true)
		if h.conn != nil {
			h.conn.SetWriteDeadline(time.Unix(1, 0))
		}
	}
}

// Resize records that h's reply holds n bytes (formatted, it may differ
// from the estimate Acquire had).
func (b *Budget) Resize(h *Hold, n int) {
	b.mu.Lock()
	b.held += n - h.n
	h.n = n
	b.peak = max(b.peak, b.held)
	b.grantLocked()
	b.mu.Unlock()
}

// Release gives back h's room once its reply is written (or failed).
func (b *Budget) Release(h *Hold) {
	b.mu.Lock()
	b.held -= h.n
	h.n = 0
	delete(b.holds, h)
	b.grantLocked()
	b.mu.Unlock()
}

// Error is an error of the budget with the errno of its reply (Coder).
type Error struct {
	Code int64
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

// ErrorCode returns the reply's errno.
func (e *Error) ErrorCode() int64 { return e.Code }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
