//go:build linux

package main

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestPumpLateFrames: the frames of a burst that timed out, when they come
// out later, are not taken for the next burst's (which would time the
// previous burst's output as its own); they are counted late and lost.
func TestPumpLateFrames(t *testing.T) {
	host, lan, err := memport.NewPair(memport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer lan.Close()
	wan, far, err := memport.NewPair(memport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer wan.Close()
	defer far.Close()
	// The "gateway": LAN RX to WAN TX, while forward is set.
	var forward, stop atomic.Bool
	var forwarded atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		rx, tx := lan.Queue(0).RX(), wan.Queue(0).TX()
		fs := make([]dataplane.Frame, 64)
		for !stop.Load() {
			if !forward.Load() {
				time.Sleep(time.Millisecond)
				continue
			}
			n := rx.Receive(fs)
			if n == 0 {
				runtime.Gosched()
				continue
			}
			out := make([]dataplane.Frame, n)
			m := tx.Alloc(out)
			for i := range out[:m] {
				out[i].SetLen(fs[i].Len())
				copy(out[i].Data(), fs[i].Data())
			}
			s := tx.Transmit(out[:m])
			tx.Free(out[s:m])
			rx.Free(fs[:n])
			forwarded.Add(int64(s))
		}
	}()
	defer func() { stop.Store(true); <-done }()

	p, _ := newPump(&scaleGateway{Host: host, Far: far}, [][]byte{make([]byte, 60)})
	p.burst() // nothing forwarded: times out, 64 owed
	if p.owed != 64 || p.got[0] != 0 {
		t.Fatalf("after a timed-out burst: owed %d, got %v; want 64 owed, 0 got", p.owed, p.got)
	}
	forward.Store(true)
	// The first burst's frames come out now, before the second is sent:
	// waited for, not slept on (a 20 ms sleep was not enough for the
	// forwarder to run under ./scripts/test.sh on a loaded 2-core machine,
	// and drain then gave the frames up).
	for deadline := time.Now().Add(10 * time.Second); forwarded.Load() < 64; {
		if time.Now().After(deadline) {
			t.Fatalf("the forwarder passed %d of the first burst's 64 frames in 10 s", forwarded.Load())
		}
		time.Sleep(time.Millisecond)
	}
	p.burst()
	if p.late != 64 || p.owed != 0 {
		t.Errorf("late %d, owed %d; want 64 late, 0 owed", p.late, p.owed)
	}
	if p.got[1] != 64 || p.sent != 128 || p.packets != 64 || p.lost() != 64 {
		t.Errorf("got %v, sent %d, packets %d, lost %d; want [0 64], 128, 64, 64", p.got, p.sent, p.packets, p.lost())
	}
	if p.times[1] >= pumpTimeout {
		t.Errorf("the second burst took %v: it waited out its time", p.times[1])
	}
}
