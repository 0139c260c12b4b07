//go:build wgpio_framecheck

package dataplane

import (
	"fmt"
	"strings"
	"testing"
)

// TestFrameCheck (go test -tags wgpio_framecheck): a frame freed twice
// panics at the second free, naming its chunk, whichever call frees it
// (FreeFrames into the cache or into a foreign pool, a copy of the Frame
// value, PutOne), and so does a stale owner's free once the chunk is
// another's, at that owner's free; frames that go round (allocated,
// spilled, refilled, drained) do not. Without the check a frame freed
// twice was handed out to two later allocations.
func TestFrameCheck(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if r == nil {
				t.Errorf("%s: no panic", name)
				return
			}
			if msg := fmt.Sprint(r); !strings.Contains(msg, "freed twice") {
				t.Errorf("%s: panic %q, want one that says freed twice", name, msg)
			}
		}()
		f()
	}
	p := newTestPool(t, 64)
	c := NewCache(p)
	f := make([]Frame, 4)
	if n := c.AllocFrames(f); n != 4 {
		t.Fatalf("AllocFrames = %d", n)
	}
	c.FreeFrames(f[:1])
	mustPanic("FreeFrames twice", func() { c.FreeFrames(f[:1]) })
	g := f[1]
	c.FreeFrames(f[1:2])
	mustPanic("a copy of a freed frame", func() { c.FreeFrames([]Frame{g}) })

	other := NewCache(newTestPool(t, 8))
	other.FreeFrames(f[2:3]) // into f's pool's free list: a foreign pool
	mustPanic("FreeFrames of a foreign frame twice", func() { other.FreeFrames(f[2:3]) })

	chunk, ok := c.Get()
	if !ok {
		t.Fatal("Get: pool empty")
	}
	p.PutOne(chunk)
	mustPanic("PutOne twice", func() { p.PutOne(chunk) })

	// A stale owner frees a frame that was allocated again: the new
	// owner's free finds it free.
	stale := f[3]
	c.FreeFrames(f[3:4])
	again, ok := c.AllocFrame()
	if !ok || again.Chunk() != stale.Chunk() {
		t.Fatalf("AllocFrame = %#x, %v; want the chunk just freed, %#x", again.Chunk(), ok, stale.Chunk())
	}
	c.FreeFrames([]Frame{stale})
	mustPanic("the new owner's free after a stale one", func() { c.FreeFrames([]Frame{again}) })

	// Round trips through the pool's free list: no panic.
	q := newTestPool(t, 4*CacheBatch)
	a, b := NewCache(q), NewCache(q)
	all := make([]Frame, 3*CacheBatch)
	for range 3 {
		n := a.AllocFrames(all)
		b.FreeFrames(all[:n]) // b spills to the pool, a refills from it
		b.Drain()
	}
	a.Drain()
	if q.FreeCount() != q.NumFrames() {
		t.Errorf("FreeCount = %d after the round trips, want %d", q.FreeCount(), q.NumFrames())
	}
}
