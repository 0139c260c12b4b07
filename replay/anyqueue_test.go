package replay

import "testing"

// TestSharedWindowFirstQueue: FirstQueue names the queue of the first
// check that named one, and none before it or after a Reset.
func TestSharedWindowFirstQueue(t *testing.T) {
	var s SharedWindow
	if q, ok := s.FirstQueue(); ok {
		t.Fatalf("FirstQueue of a new window = %d, true; want none", q)
	}
	s.CheckFrom(3, 1, 1<<60)
	s.CheckFrom(5, 2, 1<<60)
	if q, ok := s.FirstQueue(); !ok || q != 3 {
		t.Errorf("FirstQueue = %d, %v; want 3, true", q, ok)
	}
	s.Reset()
	if q, ok := s.FirstQueue(); ok {
		t.Errorf("FirstQueue after Reset = %d, true; want none", q)
	}
}

// TestAnyQueue: a batch of AnyQueue never widens an Auto window as a
// second queue's would, and sets no first queue: the queue that comes
// next is the first.
func TestAnyQueue(t *testing.T) {
	var w Window
	acc := make([]bool, 1)
	check := func(queue int, c uint64) {
		t.Helper()
		if n, widened := w.CheckBatchFrom(queue, []uint64{c}, 1<<60, acc); n != 1 || widened {
			t.Fatalf("CheckBatchFrom(%d, %d) = %d, widened %v; want accepted, not widened", queue, c, n, widened)
		}
	}
	check(AnyQueue, 1)
	check(3, 2)
	check(AnyQueue, 4)
	check(3, 3)
	if w.Wide() {
		t.Error("window wide after batches of AnyQueue and one queue")
	}
	if _, widened := w.CheckBatchFrom(5, []uint64{5}, 1<<60, acc); !widened {
		t.Error("a second queue's fresh counter did not widen the window")
	}
}
