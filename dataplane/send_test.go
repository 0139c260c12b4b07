package dataplane

import (
	"bytes"
	"testing"
)

// fakeTX is a TX half over a real Pool whose ring takes at most room
// frames per Transmit (room < 0: unlimited) and keeps what it took.
type fakeTX struct {
	pool     *Pool
	room     int
	sent     [][]byte
	reclaims int
}

func (t *fakeTX) Transmit(frames []Frame) int {
	n := len(frames)
	if t.room >= 0 {
		n = min(n, t.room)
	}
	for i := range frames[:n] {
		t.sent = append(t.sent, bytes.Clone(frames[i].Data()))
		t.pool.PutOne(frames[i].Chunk())
	}
	return n
}

func (t *fakeTX) Alloc(frames []Frame) int {
	chunks := make([]uint64, len(frames))
	n := t.pool.Get(chunks)
	for i := range n {
		frames[i] = t.pool.Frame(chunks[i]+uint64(t.pool.Headroom()), 0)
	}
	return n
}

func (t *fakeTX) Free(frames []Frame) {
	for i := range frames {
		t.pool.PutOne(frames[i].Chunk())
	}
}

func (t *fakeTX) Reclaim() int { t.reclaims++; return 0 }

func newFakeTX(t *testing.T, frames, room int) *fakeTX {
	t.Helper()
	p, err := NewPool(make([]byte, frames*2048), 2048, 256)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeTX{pool: p, room: room}
}

func TestSendCopy(t *testing.T) {
	data := []byte("an ethernet frame, more or less")
	var buf [1]Frame

	tx := newFakeTX(t, 2, -1)
	if err := SendCopy(tx, buf[:], data); err != nil {
		t.Fatalf("SendCopy = %v, want nil", err)
	}
	if len(tx.sent) != 1 || !bytes.Equal(tx.sent[0], data) || !buf[0].IsZero() || tx.pool.FreeCount() != 2 {
		t.Errorf("SendCopy sent %q, buf zero %v, free %d; want %q, true, 2", tx.sent, buf[0].IsZero(), tx.pool.FreeCount(), data)
	}

	if err := SendCopy(tx, buf[:], make([]byte, 4096)); err != ErrFrameTooLong || !buf[0].IsZero() || tx.pool.FreeCount() != 2 {
		t.Errorf("SendCopy(4096 bytes) = %v, free %d; want ErrFrameTooLong, 2", err, tx.pool.FreeCount())
	}

	full := newFakeTX(t, 2, 0)
	if err := SendCopy(full, buf[:], data); err != ErrRingFull || full.reclaims != 1 || full.pool.FreeCount() != 2 || !buf[0].IsZero() {
		t.Errorf("SendCopy(full ring) = %v, reclaims %d, free %d; want ErrRingFull, 1, 2", err, full.reclaims, full.pool.FreeCount())
	}

	empty := newFakeTX(t, 1, -1)
	var hold [1]Frame
	empty.Alloc(hold[:])
	if err := SendCopy(empty, buf[:], data); err != ErrNoFreeFrame || !buf[0].IsZero() {
		t.Errorf("SendCopy(empty pool) = %v, want ErrNoFreeFrame", err)
	}
}

func TestTransmitRetry(t *testing.T) {
	tx := newFakeTX(t, 4, 1) // the ring takes one frame per Transmit
	frames := make([]Frame, 3)
	if n := tx.Alloc(frames); n != 3 {
		t.Fatalf("Alloc = %d, want 3", n)
	}
	if sent := TransmitRetry(tx, frames); sent != 2 || tx.reclaims != 1 {
		t.Errorf("TransmitRetry = %d, reclaims %d; want 2, 1 (one retry)", sent, tx.reclaims)
	}
}
