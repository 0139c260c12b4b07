package gateway

import (
	"sync"
	"time"

	"github.com/wgpio/wgpio/fastpath"
)

// claimWindow is the shortest span over which the handshake workers' busy
// time is averaged into a claim of Ps (procClaim.settle): long enough that
// one handshake (a quarter of a millisecond) or a short burst of them
// claims nothing.
const claimWindow = 20 * time.Millisecond

// procClaim tells the fast path's thread policy how many Ps the handshake
// workers keep busy (fastpath.ClaimProcs): the average number of workers
// busy (outside their wait for work) over a window of at least
// claimWindow, rounded, the smaller of the last two windows'. In a reconnect storm that keeps two workers busy
// on two CPUs the fast path's workers then share the Go scheduler instead
// of owning locked threads: a locked worker that wakes while every P runs
// Curve25519 work takes a P through two thread hand-offs, during which
// the P runs nothing, and holds it while it spins (see
// fastpath.ClaimProcs). A quiet device claims nothing, so the workers own
// their (pinned) threads again within a window or two of the storm's end.
//
// The workers report their transitions (add) and settle the claim after
// each piece of work when a window has passed, the tick when they are idle
// (settle). Safe for concurrent use.
type procClaim struct {
	mu      sync.Mutex
	base    time.Time // the clock's origin (monotonic readings)
	active  int       // workers busy now
	since   int64     // when active last changed, ns since base
	area    int64     // workers busy × ns, since start
	start   int64     // the window's start, ns since base
	claimed int       // Ps claimed from the fast path
	last    int       // the previous window's average, rounded
	max     int       // the workers: no more is ever claimed
	clock   func() int64
}

func (c *procClaim) init(workers int) {
	c.base = time.Now()
	c.max = workers
}

// now is the monotonic clock since base (or the test's clock); c.mu held.
func (c *procClaim) now() int64 {
	if c.clock != nil {
		return c.clock()
	}
	return int64(time.Since(c.base))
}

// add records that delta workers became busy (1) or idle (-1).
func (c *procClaim) add(delta int) {
	c.mu.Lock()
	now := c.now()
	c.area += int64(c.active) * (now - c.since)
	c.since = now
	c.active += delta
	c.mu.Unlock()
}

// settle ends the window if it is claimWindow long and claims the window's
// average number of busy workers (rounded) from the fast path.
func (c *procClaim) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.area += int64(c.active) * (now - c.since)
	c.since = now
	span := now - c.start
	if span < int64(claimWindow) {
		return
	}
	busy := int((2*c.area + span) / (2 * span))
	busy = min(max(busy, 0), c.max)
	c.area, c.start = 0, now
	// A claim rises only when two windows in a row ask for it, so that
	// one handshake slowed down by a busy machine (its wall time counts)
	// claims nothing; it falls with the first window that asks for less.
	c.set(min(busy, c.last))
	c.last = busy
}

// release gives back every P claimed (Close).
func (c *procClaim) release() {
	c.mu.Lock()
	c.set(0)
	c.mu.Unlock()
}

// set changes the claim to n; c.mu held.
func (c *procClaim) set(n int) {
	if n != c.claimed {
		fastpath.ClaimProcs(n - c.claimed)
		c.claimed = n
	}
}
