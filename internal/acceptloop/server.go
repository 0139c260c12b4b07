package acceptloop

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// RefuseLogInterval is the least time between two log lines of a Server's
// refusals: a client that opens connections without end is told once,
// with the count, not once a connection.
const RefuseLogInterval = 10 * time.Second

// RefuseTime bounds a Server's Refuse function: the read deadline of the
// connection it is given is this much from its call (a request the
// client wrote as it connected is there long before, even on a loaded
// machine), and its write deadline twice that; Refuse may set the write
// deadline to RefuseTime from the moment it writes its reply (a late
// scheduled goroutine's write would otherwise fail unattempted).
const RefuseTime = 250 * time.Millisecond

// refuseTime is RefuseTime, a variable for the tests.
var refuseTime = RefuseTime

// Server serves the connections of a listener, at most Conns at once,
// each in its own goroutine. A connection over Conns waits in a queue up
// to Wait for one of them to end, then is closed unserved (refused); at
// most Conns connections wait at once, and one more is refused at once.
// So whatever its clients do, a server holds at most 2*Conns+1
// connections, and Conns+2 goroutines (the waiting connections have none
// and no buffer), where one goroutine per connection grew without bound
// with a client that opened connections and sent nothing; with Refuse,
// up to Conns more of each while refused connections are answered. How long a
// served connection lasts is the serve function's to bound (its read and
// write deadlines).
//
// The queue is first in, first out: a `wg show` behind a burst of
// connections is served in its turn. Refusals are counted (Refused) and
// logged on Log at most once per RefuseLogInterval.
//
// The fields are set before Serve and not changed after; Refused is safe
// for concurrent use. One Server serves one listener.
type Server struct {
	// Conns is how many connections are served at once; at least 1.
	Conns int
	// Wait is how long a connection over Conns waits for a slot.
	Wait time.Duration
	// Refuse, when not nil, answers a refused connection before it is
	// closed, with the protocol's error reply, so that the client can
	// say why it was turned away (the UAPI socket: uapiserve.Refuse).
	// It runs in a goroutine of its own, at most Conns at once (over
	// them a refused connection is closed unanswered, counted all the
	// same), on a connection whose read and write deadlines are
	// RefuseTime and twice that away; it may move the write deadline to
	// RefuseTime from when it writes, no further. Without it a refused
	// client sees its connection closed unanswered.
	Refuse func(net.Conn)
	// Log, when not nil, gets the failed accepts (Accept's onErr) and
	// the refusals; What names the socket in its lines ("UAPI socket").
	Log  *slog.Logger
	What string

	refused atomic.Uint64
	lastLog atomic.Int64 // unix ns of the last refusal logged
}

// Refused returns how many connections were closed unserved: their
// wait for a slot ran out, or Conns more were waiting already.
func (s *Server) Refused() uint64 { return s.refused.Load() }

// queued is a connection waiting for a slot, until deadline.
type queued struct {
	c        net.Conn
	deadline time.Time
}

// Serve accepts the connections of ln (Accept: a failed accept is logged
// and tried again) and calls serve on each in a goroutine of its own,
// which owns the connection (serve closes it, or Serve does when serve
// returns). It returns once ln is closed, with Accept's error, after it
// has closed every connection it holds, served or waiting, and every
// serve call has returned: the serve function must return once its
// connection is closed.
func (s *Server) Serve(ln net.Listener, serve func(net.Conn)) error {
	n := max(s.Conns, 1)
	var (
		slots = make(chan struct{}, n)
		queue = make(chan queued, n)
		// waiting counts the connections in queue and the one its
		// reader holds: the accept loop refuses at n, whether or not
		// the reader has run yet to take the first (on a busy CPU it
		// had not, and the queue's room was one short).
		waiting atomic.Int32
		done    = make(chan struct{})
		// answering bounds the Refuse goroutines (refuse)
		answering = make(chan struct{}, n)
		wg        sync.WaitGroup
		mu        sync.Mutex
		conns     = map[net.Conn]struct{}{} // served; guarded by mu
		closing   bool                      // Serve is returning; guarded by mu
	)
	// refuse closes c unserved, counts it, and logs it unless a refusal
	// was logged within RefuseLogInterval. With s.Refuse, c is closed
	// once Refuse answered it, in a goroutine that Serve waits for.
	refuse := func(c net.Conn, serving, waiting int) {
		total := s.refused.Add(1) // before the reply and the close: a client that sees either finds it counted
		s.logRefusal(total, serving, waiting)
		if s.Refuse == nil {
			c.Close()
			return
		}
		select {
		case answering <- struct{}{}:
		default:
			c.Close() // Conns answers under way: a flood, told nothing
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			defer func() { <-answering }() // before the close: a client that sees it closed finds the place free
			now := time.Now()
			c.SetReadDeadline(now.Add(refuseTime))
			c.SetWriteDeadline(now.Add(2 * refuseTime))
			s.Refuse(c)
		}()
	}
	// run serves c in the slot it took, then frees it.
	run := func(c net.Conn) {
		defer wg.Done()
		defer func() {
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
			<-slots
		}()
		serve(c)
	}
	// start serves c in the slot it took, unless Serve is returning:
	// the queue's reader may hand a slot out after the listener closed,
	// and a connection served then, after the sweep that closes them,
	// kept Serve waiting until its client went (or its idle timeout).
	start := func(c net.Conn) {
		mu.Lock()
		if closing {
			mu.Unlock()
			c.Close()
			<-slots
			return
		}
		conns[c] = struct{}{}
		wg.Add(1) // under mu: before the sweep's wg.Wait
		mu.Unlock()
		go run(c)
	}
	// The queue's one reader hands the slots out in its order: the
	// first connection waits for a slot until its deadline, then the
	// next (whose deadline is later).
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for {
			var q queued
			select {
			case q = <-queue:
			case <-done:
				return
			}
			t.Reset(time.Until(q.deadline))
			select {
			case slots <- struct{}{}:
				waiting.Add(-1)
				start(q.c)
			case <-t.C:
				refuse(q.c, len(slots), int(waiting.Add(-1))+1)
			case <-done:
				q.c.Close()
				return
			}
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
	}()
	defer func() {
		close(done)
		mu.Lock()
		closing = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		// What the queue's reader left: the accept loop has ended.
		for len(queue) > 0 {
			(<-queue).c.Close()
		}
	}()
	onErr := func(err error) {
		if s.Log != nil {
			s.Log.Warn(s.What+": accept failed; trying again", "err", err)
		}
	}
	for {
		c, err := Accept(ln, onErr)
		if err != nil {
			return err
		}
		// A free slot is taken at once when no connection waits
		// (the queue's reader, waiting, takes the slots freed
		// first: a channel's waiting sender before a new one), so
		// that a burst accepted before the reader runs is not
		// refused with slots free.
		if waiting.Load() == 0 {
			select {
			case slots <- struct{}{}:
				start(c)
				continue
			default:
			}
		}
		if w := waiting.Load(); w >= int32(n) {
			refuse(c, len(slots), int(w))
			continue
		}
		waiting.Add(1)
		queue <- queued{c, time.Now().Add(s.Wait)} // room: waiting < n

	}
}

// logRefusal logs the refusal that made the total n, unless a refusal
// was logged within RefuseLogInterval.
func (s *Server) logRefusal(n uint64, serving, waiting int) {
	if s.Log == nil {
		return
	}
	now, last := time.Now().UnixNano(), s.lastLog.Load()
	if last != 0 && now-last < int64(RefuseLogInterval) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.Log.Warn(s.What+": connection refused: no place free (a client holding connections open?)",
		"serving", serving, "waiting", waiting, "waited_up_to", s.Wait, "refused_total", n)
}
