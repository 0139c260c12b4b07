package bind

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestSendPastShortBatch: a Send of more than BatchSize datagrams while
// the pool has 3 frames free (and gets them back as they are sent)
// sends what finds a frame, drops and counts every other one
// (no_buffer), and says ErrNoBuffer. Send returned at its first batch
// short of frames: the datagrams of the batches after it were neither
// sent nor counted (10 of 138 lost without a trace).
func TestSendPastShortBatch(t *testing.T) {
	r := newRigPorts(t, memport.Config{RingSize: 4096}, nil)
	ep, err := r.bind.ParseEndpoint(netip.AddrPortFrom(peerIP4, 1234).String())
	if err != nil {
		t.Fatal(err)
	}
	// Take every frame of the TX pool but 3, given back with the test.
	t.Cleanup(takeTXFramesBut(r.bind.txqs[0], 3))
	bufs := make([][]byte, BatchSize+10)
	for i := range bufs {
		bufs[i] = []byte("x")
	}
	before := r.bind.Stats()
	err = r.bind.Send(bufs, ep)
	if !errors.Is(err, ErrNoBuffer) {
		t.Errorf("Send = %v, want ErrNoBuffer", err)
	}
	s := r.bind.Stats()
	sent := s.TXPackets - before.TXPackets
	dropped := s.Drops[DropNoBuffer] - before.Drops[DropNoBuffer]
	if sent < 3 || sent+dropped != uint64(len(bufs)) {
		t.Errorf("%d datagrams: %d sent, %d counted no_buffer; want 3 sent or more, and every other one counted", len(bufs), sent, dropped)
	}
}

// takeTXFramesBut takes every free frame of q's TX pool but n, and
// returns what gives them back.
func takeTXFramesBut(q *txQueue, n int) (giveBack func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var held []dataplane.Frame
	for buf := make([]dataplane.Frame, 256); ; {
		k := q.tx.Alloc(buf)
		if k == 0 {
			break
		}
		held = append(held, buf[:k]...)
	}
	q.tx.Free(held[:n])
	held = held[n:]
	return func() {
		q.mu.Lock()
		q.tx.Free(held)
		q.mu.Unlock()
	}
}
