package fastpath

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/protocol"
)

// TestHandshakeFloodQueueFull: a flood of handshake initiations that
// finds the control plane's handshake queue full is dropped and counted
// (handshake_queue_full), every one, and costs the worker no allocation:
// a line-rate flood of 148-byte messages would otherwise hand the garbage
// collector a copy of each, and its assists would slow the data path the
// flood competes with.
func TestHandshakeFloodQueueFull(t *testing.T) {
	r := newRig(t, rigConfig{})
	for len(r.b.handshakes) < cap(r.b.handshakes) {
		r.b.handshakes <- HandshakeMessage{}
	}
	var msg [protocol.InitiationSize]byte
	msg[0] = protocol.TypeInitiation
	f := wanFrame(t, r, msg[:])
	tmpl := append([]byte(nil), f.Data()...)
	r.wanA.Queue(0).TX().Free([]dataplane.Frame{f})

	frames := make([]dataplane.Frame, 64)
	tx := r.wanA.Queue(0).TX()
	wb := r.b.workers[0]
	sent := 0
	flood := func() {
		n := tx.Alloc(frames)
		for i := range n {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		sent += tx.Transmit(frames[:n])
		wb.inbound(r.clock.Now())
	}
	flood() // warm up
	allocs := testing.AllocsPerRun(50, flood)
	if got := TotalDrops(r.b.Stats())[DropHandshakeQueueFull]; got != uint64(sent) {
		t.Errorf("handshake_queue_full = %d, want every one of the %d initiations", got, sent)
	}
	if allocs != 0 {
		t.Errorf("a burst of 64 initiations into a full handshake queue: %v allocations, want 0", allocs)
	}
}
