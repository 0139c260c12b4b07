package uapiserve

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestBudgetWaitsThenBusy: a get that finds no room, beside a reply still
// being formatted (never cut), is answered EBUSY after its wait; room
// given back lets the next one through at once.
func TestBudgetWaitsThenBusy(t *testing.T) {
	b := &Budget{Limit: 100}
	h, err := b.Acquire(80, nil, new(WriteState), 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.Acquire(80, nil, new(WriteState), 300*time.Millisecond)
	var be *Error
	if !errors.As(err, &be) || be.Code != -int64(syscall.EBUSY) {
		t.Fatalf("a get without room: %v, want errno EBUSY", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("EBUSY after %v, want after the wait of 300ms", took)
	}
	b.Release(h)
	h2, err := b.Acquire(80, nil, new(WriteState), 300*time.Millisecond)
	if err != nil {
		t.Fatalf("a get after the room was given back: %v", err)
	}
	b.Release(h2)
	if b.Held() != 0 || b.Peak() != 80 {
		t.Errorf("held %d, peak %d; want 0 and 80", b.Held(), b.Peak())
	}
	// One reply larger than the bound goes through alone.
	h3, err := b.Acquire(1000, nil, new(WriteState), 0)
	if err != nil {
		t.Fatalf("one reply over the bound, nothing else held: %v", err)
	}
	b.Release(h3)
}

// TestBudgetCutsStalled: a reply whose client took nothing of it for
// ReplyStall is cut while another get waits for room (its writer's check
// fails, its write deadline is in the past), and the waiter gets the room
// once it is given back.
func TestBudgetCutsStalled(t *testing.T) {
	b := &Budget{Limit: 100}
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	st := new(WriteState)
	h, err := b.Acquire(80, server, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Moved() // its writer starts; the client never reads
	wrote := make(chan error, 1)
	go func() {
		server.SetWriteDeadline(time.Now().Add(time.Minute))
		_, err := server.Write(make([]byte, 100))
		if cerr := st.Check(); cerr != nil {
			err = cerr
		}
		b.Release(h)
		wrote <- err
	}()
	start := time.Now()
	h2, err := b.Acquire(80, nil, new(WriteState), 10*time.Second)
	if err != nil {
		t.Fatalf("a get behind a stalled reply: %v", err)
	}
	b.Release(h2)
	if took := time.Since(start); took < ReplyStall/2 || took > ReplyStall+2*time.Second {
		t.Errorf("room after %v, want about ReplyStall (%v)", took, ReplyStall)
	}
	if err := <-wrote; !errors.Is(err, ErrReplyCut) {
		t.Errorf("the stalled reply's write: %v, want ErrReplyCut", err)
	}
}
