package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/protocol"
)

// TestSendWait: with the mailbox full, SendWait waits for the worker to
// make room and then delivers the packet, counting no drop; only a wait
// that runs out is counted, once. (The worker is driven by hand, so
// nothing here depends on how fast anything runs.)
func TestSendWait(t *testing.T) {
	r := newRig(t, rigConfig{})
	wa := r.a.workers[0]
	payload := make([]byte, protocol.ResponseSize)
	payload[0] = protocol.TypeResponse
	pkt := ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Payload: payload, Peer: r.peerAB}
	for i := range MailboxLen {
		if !r.a.Send(0, pkt) {
			t.Fatalf("Send %d refused below MailboxLen", i)
		}
	}
	if r.a.SendWait(0, pkt, time.Millisecond) {
		t.Fatal("SendWait into a full mailbox that nobody drains succeeded")
	}
	if got := r.a.Stats()[0].Drops[DropMailboxFull]; got != 1 {
		t.Fatalf("mailbox_full after one SendWait ran out = %d, want 1", got)
	}

	done := make(chan bool)
	go func() { done <- r.a.SendWait(0, pkt, time.Hour) }()
	select {
	case <-done:
		t.Fatal("SendWait returned while the mailbox was full")
	case <-time.After(20 * time.Millisecond):
	}
	// The worker sends one burst's worth and so makes room.
	wa.drainMailbox(r.clock.Now())
	if !<-done {
		t.Fatal("SendWait failed after the worker made room")
	}
	if got := r.a.Stats()[0].Drops[DropMailboxFull]; got != 1 {
		t.Fatalf("mailbox_full after a SendWait that waited = %d, want still 1", got)
	}
	if got := len(wa.mailbox); got != MailboxLen-wa.burst+1 {
		t.Fatalf("mailbox holds %d, want %d (the waiting packet delivered)", got, MailboxLen-wa.burst+1)
	}
}
