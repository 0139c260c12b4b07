package gateway

import (
	"sync"
	"time"
)

// replyIdle is how long IpcGet's buffers are kept after the last get.
const replyIdle = time.Minute

// replyBufs keeps IpcGet's reply buffers (about 350 bytes a peer: 3.5 MB
// at 10,000 peers) between gets, for as long as gets keep coming: a
// monitoring loop that runs `wg show` every few seconds then reuses pages
// already mapped. A fresh buffer costs a page fault per 4 KiB as the reply
// is formatted, which made a cold get of 10,000 peers take 20 ms instead
// of 5, and 45 ms during a handshake storm (a sync.Pool, used before,
// gives its buffers back at every second garbage collection, which a storm
// runs often). They go after replyIdle without a get (expire, from the
// device's tick), so an idle device keeps nothing. At most two are kept
// (two gets at once); a third concurrent get allocates its own. Safe for
// concurrent use.
type replyBufs struct {
	mu   sync.Mutex
	free [][]byte
	last time.Time // of the last get
}

// get returns a buffer of length 0 and capacity at least need.
func (r *replyBufs) get(need int, now time.Time) []byte {
	r.mu.Lock()
	r.last = now
	var b []byte
	if n := len(r.free); n > 0 {
		b, r.free[n-1] = r.free[n-1], nil
		r.free = r.free[:n-1]
	}
	r.mu.Unlock()
	if cap(b) < need {
		b = make([]byte, 0, need)
	}
	return b[:0]
}

// put gives back a buffer from get; its contents must already be erased.
func (r *replyBufs) put(b []byte) {
	r.mu.Lock()
	if len(r.free) < 2 {
		r.free = append(r.free, b[:0])
	}
	r.mu.Unlock()
}

// expire drops the buffers when no get came for replyIdle.
func (r *replyBufs) expire(now time.Time) {
	r.mu.Lock()
	if len(r.free) > 0 && now.Sub(r.last) >= replyIdle {
		clear(r.free)
		r.free = r.free[:0]
	}
	r.mu.Unlock()
}
