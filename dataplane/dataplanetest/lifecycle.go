package dataplanetest

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// Close and reopen, and no leaked goroutines or file descriptors.

func (s *suite) testCloseReopen(t *testing.T, queues int) {
	p := s.open(t, queues)
	sent := p.send(dirAB, 0, 8, []int{64})
	p.collect(dirAB, sent, false)
	// Hold a frame across Close.
	var held [1]dataplane.Frame
	tx := p.a.Queue(0).TX()
	if tx.Alloc(held[:]) != 1 {
		t.Fatal("Alloc of one frame failed")
	}
	// A waiter on a half of a port closed under it.
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Add(p.b.Queue(0).RX())
	p.close()
	if c, ok := p.b.Queue(0).RX().(dataplane.PortCloser); ok && c.PortClosed() {
		waited := make(chan error, 1)
		go func() { _, err := w.Wait(dataplane.Forever); waited <- err }()
		select {
		case err := <-waited:
			if !errors.Is(err, dataplane.ErrClosed) {
				t.Errorf("Wait on a half whose port closed = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Wait on a half whose port closed blocked 10 s")
		}
	} else {
		t.Errorf("%s: the RX half is no PortCloser, or not closed after Close", p.b.Name())
	}
	buf := make([]dataplane.Frame, 8)
	for _, port := range []dataplane.Port{p.a, p.b} {
		for qi := range port.NumQueues() {
			q := port.Queue(qi)
			if n := q.RX().Receive(buf); n != 0 {
				t.Errorf("%s q%d: Receive after Close = %d, want 0", port.Name(), qi, n)
			}
			if n := q.TX().Alloc(buf); n != 0 {
				t.Errorf("%s q%d: Alloc after Close = %d, want 0", port.Name(), qi, n)
				q.TX().Free(buf[:n])
			}
		}
	}
	if n := tx.Transmit(held[:]); n != 0 {
		t.Errorf("%s: Transmit after Close = %d, want 0", p.a.Name(), n)
	} else {
		tx.Free(held[:]) // allowed after Close
	}
	// And again.
	p2 := s.open(t, queues)
	sent = p2.send(dirAB, 0, 8, []int{64})
	p2.collect(dirAB, sent, false)
	sent = p2.send(dirBA, 0, 8, []int{64})
	p2.collect(dirBA, sent, false)
}

func (s *suite) testLeaks(t *testing.T, queues int) {
	// A first pair may make lasting resources (namespaces, the factory's
	// own state); measure around the second.
	warm := s.open(t, queues)
	warm.close()
	runtime.GC()
	fds, goroutines := countFDs(t), runtime.NumGoroutine()

	p := s.open(t, queues)
	sent := p.send(dirAB, 0, 8, []int{64})
	p.collect(dirAB, sent, false)
	sent = p.send(dirBA, 0, 8, []int{64})
	p.collect(dirBA, sent, false)
	w, err := dataplane.NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	w.Add(p.a.Queue(0).RX())
	w.Add(p.b.Queue(0).RX())
	if _, err := w.Wait(0); err != nil {
		t.Errorf("Wait(0) = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Waiter.Close() = %v", err)
	}
	p.close()

	deadline := time.Now().Add(2 * time.Second)
	for {
		runtime.GC()
		f, g := countFDs(t), runtime.NumGoroutine()
		if f <= fds && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			if f > fds {
				t.Errorf("open file descriptors: %d after Close, %d before the pair", f, fds)
			}
			if g > goroutines {
				buf := make([]byte, 1<<16)
				t.Errorf("goroutines: %d after Close, %d before the pair:\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count file descriptors: %v", err)
	}
	return len(ents)
}
