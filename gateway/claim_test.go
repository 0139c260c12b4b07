package gateway

import (
	"testing"
	"time"
)

// TestProcClaim: the claim is the window's average number of busy
// handshake workers, rounded, capped at the workers, and nothing is
// claimed for one handshake or a window shorter than claimWindow.
func TestProcClaim(t *testing.T) {
	var now int64
	ms := func(n int64) { now += n * int64(time.Millisecond) }
	var c procClaim
	c.init(2)
	c.clock = func() int64 { return now }
	defer c.release()

	// One handshake of 0.3 ms in a window of 50 ms: nothing.
	c.add(1)
	now += 300_000
	c.add(-1)
	ms(50)
	c.settle()
	if c.claimed != 0 {
		t.Fatalf("one handshake claimed %d Ps", c.claimed)
	}
	// Two workers busy throughout: two, but not before the window ends.
	c.add(1)
	c.add(1)
	ms(10)
	c.settle()
	if c.claimed != 0 {
		t.Fatalf("claimed %d Ps after 10 ms, before the window ended", c.claimed)
	}
	ms(40)
	c.settle()
	if c.claimed != 2 {
		t.Fatalf("two busy workers: claimed %d Ps, want 2", c.claimed)
	}
	// One of them idle for the window's last 70 %: 1.3 → 1.
	ms(15)
	c.add(-1)
	ms(35)
	c.settle()
	if c.claimed != 1 {
		t.Fatalf("1.3 busy workers: claimed %d Ps, want 1", c.claimed)
	}
	// A third busy goroutine (more than the workers) is capped.
	c.add(1)
	c.add(1)
	ms(50)
	c.settle()
	if c.claimed != 2 {
		t.Fatalf("three busy: claimed %d Ps, want the 2 workers", c.claimed)
	}
	// Quiet again: nothing.
	c.add(-3)
	ms(50)
	c.settle()
	if c.claimed != 0 {
		t.Fatalf("quiet device claims %d Ps", c.claimed)
	}
}
