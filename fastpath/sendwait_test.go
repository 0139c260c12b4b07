package fastpath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/protocol"
)

// TestSendWait: with the mailbox full, SendWait waits for the worker to
// make room and then delivers the packet, counting no drop; a wait that
// runs out returns false, not counted by the engine (its caller counts
// it: gateway's mailbox_full), nor is a Send the full mailbox refused.
// (The worker is driven by hand, so nothing here depends on how fast
// anything runs.)
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
	if got := r.a.Stats()[0].Drops[DropMailboxFull]; got != 0 {
		t.Fatalf("mailbox_full after a SendWait that waited = %d, want 0", got)
	}
	if got := len(wa.mailbox); got != MailboxLen-wa.burst+1 {
		t.Fatalf("mailbox holds %d, want %d (the waiting packet delivered)", got, MailboxLen-wa.burst+1)
	}
	for len(wa.mailbox) < MailboxLen {
		r.a.Send(0, pkt)
	}
	if r.a.Send(0, pkt) {
		t.Fatal("Send into a full mailbox succeeded")
	}
	if r.a.SendWait(0, pkt, time.Millisecond) {
		t.Fatal("SendWait into a full mailbox that nobody drains succeeded")
	}
	if got := r.a.Stats()[0].Drops[DropMailboxFull]; got != 0 {
		t.Fatalf("mailbox_full after a Send refused and a SendWait ran out = %d, want 0 (the caller's to count)", got)
	}
}

// unresolved is a WAN resolver whose next hops never answer; route
// says whether it has a route (WANRoutes) toward every address.
type unresolved struct{ route bool }

func (unresolved) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{}, false }

type unresolvedRoutes struct{ unresolved }

func (u unresolvedRoutes) HasRoute(netip.Addr) bool { return u.route }

// TestControlNoWANRoute: a handshake message whose WAN next hop never
// resolves waits, then is dropped as no_wan_route when the WAN resolver
// has no route toward the endpoint, and as no_neighbour when it has one
// (or cannot say: no WANRoutes); its bytes count in the peer's tx_bytes
// as Linux counts them: not without a route, with one (the kernel's
// socket took the message before its neighbour layer dropped it).
func TestControlNoWANRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  Resolver
		want DropReason
	}{
		{"no route", unresolvedRoutes{unresolved{route: false}}, DropNoWANRoute},
		{"route, no answer", unresolvedRoutes{unresolved{route: true}}, DropNoNeighbour},
		{"resolver without routes", unresolved{}, DropNoNeighbour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			r.a.cfg.WANResolver = tc.res // the workers are driven by hand
			wa := r.a.workers[0]
			wa.publish(r.clock.Now())
			tx0 := r.peerAB.TxBytes.Load()
			payload := make([]byte, protocol.InitiationSize)
			payload[0] = protocol.TypeInitiation
			if !r.a.Send(0, ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Payload: payload, Peer: r.peerAB}) {
				t.Fatal("Send refused")
			}
			wa.drainMailbox(r.clock.Now())
			if len(wa.ctlWait) != 1 {
				t.Fatalf("%d control packets wait for their next hop, want 1", len(wa.ctlWait))
			}
			wa.flushControlWait(time.Now())
			if len(wa.ctlWait) != 1 {
				t.Fatal("the packet was dropped before it waited")
			}
			wa.flushControlWait(time.Now().Add(neighbourWaitMax + time.Second))
			d := r.a.Stats()[0].Drops
			if len(wa.ctlWait) != 0 || d[tc.want] != 1 || d[DropNoWANRoute]+d[DropNoNeighbour] != 1 {
				t.Fatalf("after the wait: %d waiting, no_wan_route %d, no_neighbour %d; want 1 %v",
					len(wa.ctlWait), d[DropNoWANRoute], d[DropNoNeighbour], tc.want)
			}
			// Without a route: not in the peer's transfer (wg show), as
			// the kernel counts nothing when its route lookup fails;
			// with one, counted, as the kernel's socket took it before
			// its neighbour layer dropped it.
			wa.publish(r.clock.Now())
			want := uint64(len(payload))
			if tc.want == DropNoWANRoute {
				want = 0
			}
			if got := r.peerAB.TxBytes.Load() - tx0; got != want {
				t.Errorf("tx_bytes grew by %d for a handshake message dropped as %v, want %d", got, tc.want, want)
			}
			// The wait full: the message over its bound is dropped at
			// once, judged alike (it was no_neighbour whatever the
			// route).
			for range maxControlWait + 1 {
				if !r.a.Send(0, ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Payload: payload, Peer: r.peerAB}) {
					t.Fatal("Send refused")
				}
				wa.drainMailbox(r.clock.Now())
			}
			d = r.a.Stats()[0].Drops
			if len(wa.ctlWait) != maxControlWait || d[tc.want] != 2 || d[DropNoWANRoute]+d[DropNoNeighbour] != 2 {
				t.Errorf("the wait full: %d waiting, no_wan_route %d, no_neighbour %d; want %d, one more %v",
					len(wa.ctlWait), d[DropNoWANRoute], d[DropNoNeighbour], maxControlWait, tc.want)
			}
		})
	}
}

// lateResolver is a WAN resolver whose next hops answer once ok is set.
type lateResolver struct{ ok *bool }

func (l lateResolver) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{2, 0, 0, 0, 0, 9}, *l.ok }

// TestControlTxBytesWhenSent: a handshake message that waits for its next
// hop counts in its peer's tx_bytes once it is sent, not while it waits;
// one sent at once counts at once.
func TestControlTxBytesWhenSent(t *testing.T) {
	r := newRig(t, rigConfig{})
	ok := false
	r.a.cfg.WANResolver = lateResolver{&ok} // the workers are driven by hand
	wa := r.a.workers[0]
	wa.publish(r.clock.Now())
	tx0 := r.peerAB.TxBytes.Load()
	payload := make([]byte, protocol.InitiationSize)
	payload[0] = protocol.TypeInitiation
	send := func() {
		t.Helper()
		if !r.a.Send(0, ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Payload: payload, Peer: r.peerAB}) {
			t.Fatal("Send refused")
		}
		wa.drainMailbox(r.clock.Now())
	}
	txBytes := func() uint64 {
		wa.publish(r.clock.Now())
		return r.peerAB.TxBytes.Load() - tx0
	}
	send()
	if len(wa.ctlWait) != 1 {
		t.Fatalf("%d control packets wait for their next hop, want 1", len(wa.ctlWait))
	}
	if got := txBytes(); got != 0 {
		t.Errorf("tx_bytes %d while the message waits for its next hop, want 0", got)
	}
	ok = true
	wa.flushControlWait(time.Now())
	if len(wa.ctlWait) != 0 {
		t.Fatal("the message still waits with its next hop resolved")
	}
	if got, want := txBytes(), uint64(len(payload)); got != want {
		t.Errorf("tx_bytes %d once the waiting message was sent, want %d", got, want)
	}
	send()
	if got, want := txBytes(), uint64(2*len(payload)); got != want {
		t.Errorf("tx_bytes %d after a second message sent at once, want %d", got, want)
	}
}

// TestSendWaitStalled: once a wait for a full mailbox ran out, SendWait to
// that worker refuses at once (uncounted, as Send) instead of waiting again, until
// the worker takes mail; then it waits for room as before. (A worker
// that does not run would otherwise hold every handshake worker for the
// whole timeout per message.) Driven by hand: an hour-long timeout that
// returns at all shows it did not wait.
func TestSendWaitStalled(t *testing.T) {
	r := newRig(t, rigConfig{})
	wa := r.a.workers[0]
	payload := make([]byte, protocol.ResponseSize)
	payload[0] = protocol.TypeResponse
	pkt := ControlPacket{Dst: netip.AddrPortFrom(wanAddrB, portB), Payload: payload, Peer: r.peerAB}
	for range MailboxLen {
		r.a.Send(0, pkt)
	}
	if r.a.SendWait(0, pkt, time.Millisecond) {
		t.Fatal("SendWait into a full mailbox that nobody drains succeeded")
	}
	for i := range 3 {
		if r.a.SendWait(0, pkt, time.Hour) {
			t.Fatalf("SendWait %d to a stalled worker succeeded with its mailbox full", i)
		}
	}
	if got := r.a.Stats()[0].Drops[DropMailboxFull]; got != 0 {
		t.Fatalf("mailbox_full = %d, want 0 (each refusal the caller's to count)", got)
	}
	// The worker takes mail: no longer stalled. Fill the room it made,
	// then a SendWait waits again, and delivers once there is room.
	wa.drainMailbox(r.clock.Now())
	for len(wa.mailbox) < MailboxLen {
		r.a.Send(0, pkt)
	}
	done := make(chan bool)
	go func() { done <- r.a.SendWait(0, pkt, time.Hour) }()
	select {
	case ok := <-done:
		t.Fatalf("SendWait returned %v at once after the worker took mail again; want it to wait", ok)
	case <-time.After(20 * time.Millisecond):
	}
	wa.drainMailbox(r.clock.Now())
	if !<-done {
		t.Fatal("SendWait failed after the worker made room")
	}
}
