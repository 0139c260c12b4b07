package dataplane

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/wakefd"
)

// fakeRX is an RX half whose readiness is a wait fd (internal/wakefd) the
// test signals.
type fakeRX struct {
	fd, wfd int         // read end (WaitFD), write end
	pending atomic.Bool // frames "waiting": Arm returns false
	arms    atomic.Int32
}

func newFakeRX(t *testing.T) *fakeRX {
	t.Helper()
	fd, wfd, err := wakefd.New()
	if err != nil {
		t.Fatalf("wakefd.New: %v", err)
	}
	t.Cleanup(func() { wakefd.Close(fd, wfd) })
	return &fakeRX{fd: fd, wfd: wfd}
}

func (r *fakeRX) Receive([]Frame) int { return 0 }
func (r *fakeRX) Free([]Frame)        {}
func (r *fakeRX) WaitFD() int         { return r.fd }
func (r *fakeRX) Arm() bool           { r.arms.Add(1); return !r.pending.Load() }
func (r *fakeRX) kick() {
	wakefd.Signal(r.wfd)
}

func newTestWaiter(t *testing.T) *Waiter {
	t.Helper()
	w, err := NewWaiter()
	if err != nil {
		t.Fatalf("NewWaiter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestWaiterTimeout(t *testing.T) {
	w := newTestWaiter(t)
	w.Add(newFakeRX(t))
	for _, timeout := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond} {
		start := time.Now()
		rang, err := w.Wait(timeout)
		if err != nil || rang {
			t.Errorf("Wait(%v) = %v, %v; want false, nil", timeout, rang, err)
		}
		if d := time.Since(start); d < timeout {
			t.Errorf("Wait(%v) returned after %v, before the timeout", timeout, d)
		}
	}
}

func TestWaiterDoorbell(t *testing.T) {
	w := newTestWaiter(t)
	w.Add(newFakeRX(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(10 * time.Millisecond)
		w.Ring()
	}()
	rang, err := w.Wait(Forever)
	if err != nil || !rang {
		t.Errorf("Wait(Forever) with a ring from another goroutine = %v, %v; want true, nil", rang, err)
	}
	<-done
	// The bell was cleared: the next Wait times out.
	if rang, err := w.Wait(0); err != nil || rang {
		t.Errorf("Wait(0) after the ring was consumed = %v, %v; want false, nil", rang, err)
	}
	// Rings before Wait are not lost, and many rings are one wake.
	w.Ring()
	w.Ring()
	if rang, err := w.Wait(time.Second); err != nil || !rang {
		t.Errorf("Wait after two Rings = %v, %v; want true, nil", rang, err)
	}
	if rang, _ := w.Wait(0); rang {
		t.Errorf("second Wait after two Rings = true, want false")
	}
}

func TestWaiterRXReady(t *testing.T) {
	w := newTestWaiter(t)
	rxs := []*fakeRX{newFakeRX(t), newFakeRX(t), newFakeRX(t)}
	for _, rx := range rxs {
		w.Add(rx)
	}
	// Every goroutine that writes to a descriptor of the test is waited
	// for before the test ends: a late write would land on whatever a
	// later test's descriptor of the same number is (TestWaiterRemove
	// once saw its Wait end early so).
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		time.Sleep(10 * time.Millisecond)
		rxs[2].kick()
	})
	start := time.Now()
	rang, err := w.Wait(10 * time.Second)
	if err != nil || rang {
		t.Errorf("Wait with a ready RX = %v, %v; want false, nil", rang, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait with a ready RX took %v, want a wake-up", d)
	}
	for i, rx := range rxs {
		if rx.arms.Load() != 1 {
			t.Errorf("rx %d armed %d times, want 1", i, rx.arms.Load())
		}
	}
}

func TestWaiterArmFalseDoesNotBlock(t *testing.T) {
	w := newTestWaiter(t)
	rx := newFakeRX(t)
	rx.pending.Store(true)
	w.Add(rx)
	start := time.Now()
	if _, err := w.Wait(Forever); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait(Forever) with an RX whose Arm() = false blocked for %v", d)
	}
}

func TestWaiterClose(t *testing.T) {
	w, err := NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close() = %v, want ErrClosed", err)
	}
	w.Ring() // no effect, no panic
	if _, err := w.Wait(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
}

func TestDropReasonString(t *testing.T) {
	for r := range NumDropReasons {
		if s := r.String(); s == "" || s == "unknown" {
			t.Errorf("DropReason(%d).String() = %q, want a name", r, s)
		}
	}
	if s := NumDropReasons.String(); s != "unknown" {
		t.Errorf("DropReason(%d).String() = %q, want unknown", NumDropReasons, s)
	}
}

func TestStatsAdd(t *testing.T) {
	a := Stats{RXPackets: 1, RXBytes: 2, TXPackets: 3, TXBytes: 4, Copies: 5, RingFull: 6}
	a.Drops[DropRunt] = 7
	b := a
	b.Backend = map[string]uint64{"x": 1}
	a.Add(b)
	a.Add(b)
	if a.RXPackets != 3 || a.Copies != 15 || a.Drops[DropRunt] != 21 || a.Backend["x"] != 2 {
		t.Errorf("Stats.Add: got %+v", a)
	}
}

// notifyRX is a fakeRX that is a Notifier: the test wakes the waiter by
// sending on the channel it was given, as memport's transmitters do.
type notifyRX struct {
	fakeRX
	ch atomic.Pointer[chan struct{}]
}

func (r *notifyRX) Notify(ch chan struct{}) {
	if ch == nil {
		r.ch.Store(nil)
		return
	}
	r.ch.Store(&ch)
}

func (r *notifyRX) wake() {
	select {
	case *r.ch.Load() <- struct{}{}:
	default:
	}
}

func TestWaiterParks(t *testing.T) {
	w := newTestWaiter(t)
	rx := &notifyRX{fakeRX: fakeRX{fd: -1}}
	w.Add(rx)
	if !w.Parks() || rx.ch.Load() == nil {
		t.Fatalf("Parks() = %v, channel given %v; want true, true", w.Parks(), rx.ch.Load() != nil)
	}
	// Timeouts, as in poll mode.
	for _, timeout := range []time.Duration{0, time.Millisecond} {
		start := time.Now()
		if rang, err := w.Wait(timeout); err != nil || rang {
			t.Errorf("Wait(%v) = %v, %v; want false, nil", timeout, rang, err)
		}
		if d := time.Since(start); d < timeout {
			t.Errorf("Wait(%v) returned after %v, before the timeout", timeout, d)
		}
	}
	// A half's wake-up ends Wait(Forever), not as a ring.
	// The goroutines below are waited for before the test ends: one
	// preempted inside Ring, between the doorbell's token and the write
	// (the waiter in poll mode by then), would write to the closed
	// doorbell's number, a later test's descriptor (TestWaiterRemove's
	// Wait once returned after 35 µs so).
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		time.Sleep(5 * time.Millisecond)
		rx.wake()
	})
	if rang, err := w.Wait(Forever); err != nil || rang {
		t.Errorf("Wait(Forever) woken by a half = %v, %v; want false, nil", rang, err)
	}
	// The doorbell, from another goroutine and before Wait.
	wg.Go(func() {
		time.Sleep(5 * time.Millisecond)
		w.Ring()
	})
	if rang, err := w.Wait(Forever); err != nil || !rang {
		t.Errorf("Wait(Forever) with a ring = %v, %v; want true, nil", rang, err)
	}
	w.Ring()
	w.Ring()
	if rang, err := w.Wait(time.Second); err != nil || !rang {
		t.Errorf("Wait after two Rings = %v, %v; want true, nil", rang, err)
	}
	if rang, _ := w.Wait(0); rang {
		t.Errorf("second Wait after two Rings = true, want false")
	}
	// Frames waiting (Arm false): Wait does not block.
	rx.pending.Store(true)
	if _, err := w.Wait(Forever); err != nil {
		t.Errorf("Wait with frames waiting: %v", err)
	}
	rx.pending.Store(false)
	// Sleeping and waking allocate nothing.
	if n := testing.AllocsPerRun(100, func() {
		rx.wake()
		w.Wait(time.Second)
		w.Wait(0)
	}); n != 0 {
		t.Errorf("Wait in channel mode allocates %v times per call, want 0", n)
	}
	// A ring in channel mode survives a switch to poll mode (a half that
	// is not a Notifier).
	w.Ring()
	w.Add(newFakeRX(t))
	if w.Parks() || rx.ch.Load() != nil {
		t.Fatalf("after adding a poll-only half: Parks() = %v, channel kept %v; want false, false", w.Parks(), rx.ch.Load() != nil)
	}
	if rang, err := w.Wait(time.Second); err != nil || !rang {
		t.Errorf("Wait in poll mode after a ring in channel mode = %v, %v; want true, nil", rang, err)
	}
}

// TestWaiterRemove: a half removed (Remove) no longer keeps Wait from
// blocking, in either mode: a closed port's half, whose Arm fails for
// good, made every Wait return at once (a core spinning: 71,096 returns
// in 200 ms of Wait(100 ms)), and there was no way to take it out.
func TestWaiterRemove(t *testing.T) {
	for _, mode := range []string{"poll", "channel"} {
		w := newTestWaiter(t)
		var keep, gone RX
		if mode == "poll" {
			keep, gone = newFakeRX(t), newFakeRX(t)
		} else {
			keep, gone = &notifyRX{fakeRX: fakeRX{fd: -1}}, &notifyRX{fakeRX: fakeRX{fd: -1}}
		}
		w.Add(keep)
		w.Add(gone)
		// gone's port closed: its Arm fails from now on.
		switch g := gone.(type) {
		case *fakeRX:
			g.pending.Store(true)
		case *notifyRX:
			g.pending.Store(true)
		}
		if !w.Remove(gone) || w.Remove(gone) {
			t.Fatalf("%s: Remove of an added half, then again: want true, then false", mode)
		}
		start := time.Now()
		if _, err := w.Wait(30 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("%s: Wait(30 ms) returned after %v with the failing half removed, want the timeout", mode, d)
		}
		if mode == "channel" && !w.Parks() {
			t.Errorf("channel mode: Parks() = false after Remove")
		}
	}
}
