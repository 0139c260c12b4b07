package gateway

import (
	"testing"
	"time"
)

// TestProcClaim: the claim is the average number of busy handshake
// workers over a window, rounded, capped at the workers; it rises only
// after two windows that ask for it and falls with the first that asks
// for less; one handshake, however slow, or a window shorter than
// claimWindow claims nothing.
func TestProcClaim(t *testing.T) {
	var now int64
	ms := func(n int64) { now += n * int64(time.Millisecond) }
	var c procClaim
	c.init(2)
	c.clock = func() int64 { return now }
	defer c.release()
	window := func(want int, what string) {
		t.Helper()
		c.settle()
		if c.claimed != want {
			t.Fatalf("%s: claimed %d Ps, want %d", what, c.claimed, want)
		}
	}

	// One handshake of 0.3 ms in a window of 50 ms: nothing.
	c.add(1)
	now += 300_000
	c.add(-1)
	ms(50)
	window(0, "one handshake")
	// One handshake that a loaded machine stretched over a whole window:
	// one window only, nothing.
	c.add(1)
	ms(50)
	c.add(-1)
	window(0, "one slow handshake")
	ms(50)
	window(0, "after the slow handshake")
	// Two workers busy throughout: nothing before the window ends,
	// nothing after one window, two after the second.
	c.add(1)
	c.add(1)
	ms(10)
	window(0, "10 ms into the window")
	ms(40)
	window(0, "one window of two busy workers")
	ms(50)
	window(2, "two windows of two busy workers")
	// One of them idle for the window's last 70 %: 1.3 → 1 at once.
	ms(15)
	c.add(-1)
	ms(35)
	window(1, "1.3 busy workers")
	// More busy goroutines than the workers: capped (after two windows).
	c.add(1)
	c.add(1)
	ms(50)
	window(1, "one window of three busy")
	ms(50)
	window(2, "three busy")
	// Quiet again: nothing, at once.
	c.add(-3)
	ms(50)
	window(0, "quiet")
}
