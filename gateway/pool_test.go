package gateway

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// TestAdmitUnderLoad: under load, the admission in front of the pool's
// queue answers an initiation without a valid MAC2 with a cookie reply at
// once and does not queue it; the retry carrying MAC2 from that cookie is
// queued; a bad MAC1 is dropped there; and a full queue drops (counted)
// instead of blocking.
func TestAdmitUnderLoad(t *testing.T) {
	r := newLightRig(t, 1, 1)
	s := r.sims[0]
	r.f.load.Store(true)

	r.dev.admit(s.message(s.initiation(t, 1)))
	sent := r.f.sentSince(0)
	cr := ofType(sent, noise.TypeCookieReply, noise.CookieReplySize)
	if len(cr) != 1 || len(sent) != 1 {
		t.Fatalf("unproven initiation under load: sent %v, want one cookie reply", types(sent))
	}
	if n := len(r.dev.pool.msgs); n != 0 {
		t.Fatalf("unproven initiation under load: %d queued, want 0", n)
	}
	if err := s.hs.ConsumeCookieReply(cr[0].payload); err != nil {
		t.Fatal(err)
	}

	proven := s.message(s.initiation(t, 2)) // carries MAC2 now
	r.dev.admit(proven)
	if n := len(r.dev.pool.msgs); n != 1 {
		t.Fatalf("initiation with a valid MAC2 under load: %d queued, want 1", n)
	}
	if n := r.f.nsent(); n != 1 {
		t.Fatalf("initiation with a valid MAC2: %d packets sent in all, want still 1", n)
	}

	bad := s.initiation(t, 3)
	bad[noise.InitiationOffsetMAC1] ^= 1
	r.dev.admit(s.message(bad))
	st := r.dev.Stats()
	if n := len(r.dev.pool.msgs); n != 1 || st.Drops[DropHandshakeInvalid] != 1 {
		t.Fatalf("bad MAC1: %d queued, handshake_invalid %d; want 1, 1", n, st.Drops[DropHandshakeInvalid])
	}

	for len(r.dev.pool.msgs) < cap(r.dev.pool.msgs) {
		r.dev.pool.msgs <- proven
	}
	r.dev.admit(proven) // must not block
	if got := r.dev.Stats().Drops[DropHandshakeBacklogFull]; got != 1 {
		t.Fatalf("handshake_backlog_full = %d, want 1", got)
	}
	if got := r.dev.Stats().HandshakeBacklogPeak; got != 1 {
		t.Errorf("HandshakeBacklogPeak = %d, want 1 (admit's own)", got)
	}
}

// TestResponseWaitsForMailbox: a response that finds the dataplane's
// mailbox full waits for room and is delivered, not counted as dropped;
// one whose wait runs out is counted once (mailbox_full) and not counted
// as sent.
func TestResponseWaitsForMailbox(t *testing.T) {
	r := newLightRig(t, 2, 1)
	s := r.sims[0]
	r.f.fullUntil.Store(1)
	r.dev.HandleMessage(s.message(s.initiation(t, 1)))
	st := r.dev.Stats()
	if n := len(r.responses()); n != 1 || r.f.waited.Load() != 1 {
		t.Fatalf("response after a wait for the mailbox: %d delivered, %d waits; want 1, 1", n, r.f.waited.Load())
	}
	if st.Drops[DropMailboxFull] != 0 || st.ResponsesSent != 1 {
		t.Fatalf("response after a wait: mailbox_full %d, responses sent %d; want 0, 1", st.Drops[DropMailboxFull], st.ResponsesSent)
	}

	r.f.mailboxFull.Store(true)
	o := r.sims[1]
	r.dev.HandleMessage(o.message(o.initiation(t, 1)))
	st = r.dev.Stats()
	if n := len(r.responses()); n != 1 {
		t.Fatalf("%d responses delivered, want still 1", n)
	}
	if st.Drops[DropMailboxFull] != 1 || st.ResponsesSent != 1 {
		t.Fatalf("response whose wait ran out: mailbox_full %d, responses sent %d; want 1, 1", st.Drops[DropMailboxFull], st.ResponsesSent)
	}
}

// TestPoolAnswersStormThroughAdmission: a started device under load, fed
// through the dataplane's channel, answers unproven initiations with
// cookie replies and the retries with MAC2 with responses.
func TestPoolAnswersStormThroughAdmission(t *testing.T) {
	const n = 32
	r := newLightRig(t, n, 2)
	r.f.viaChannel = true
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	r.f.load.Store(true)
	for i, s := range r.sims {
		r.f.hs <- s.message(s.initiation(t, uint32(i+1)))
	}
	// A worker counts a reply after its post returns: the dataplane can
	// hold all n before the last is counted. Wait for both.
	waitFor(t, func() bool {
		return len(ofType(r.f.sentSince(0), noise.TypeCookieReply, 0)) == n && r.dev.Stats().CookieRepliesSent >= n
	})
	for _, c := range ofType(r.f.sentSince(0), noise.TypeCookieReply, 0) {
		i := int(c.payload[noise.CookieReplyOffsetReceiver]) - 1
		if err := r.sims[i].hs.ConsumeCookieReply(c.payload); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range r.sims {
		r.f.hs <- s.message(s.initiation(t, uint32(i+1)))
	}
	// Likewise for the responses.
	waitFor(t, func() bool { return len(r.responses()) == n && r.dev.Stats().ResponsesSent >= n })
	st := r.dev.Stats()
	if st.CookieRepliesSent != n || st.ResponsesSent != n || st.Drops.Total() != 0 {
		t.Fatalf("cookie replies %d, responses %d, drops %v; want %d, %d, none", st.CookieRepliesSent, st.ResponsesSent, st.Drops.List(), n, n)
	}
}

// waitFor polls cond for up to a minute of real time (a bound for a hung
// test, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCloseCountsBacklog: received handshake messages that passed
// admission and still wait for a handshake worker when the device closes
// are dropped, counted closed (each once: the backlog is empty after).
// Before, they were counted nowhere: wgpio_handshake_messages_received
// grew by them and no drop said where they went.
func TestCloseCountsBacklog(t *testing.T) {
	r := newLightRig(t, 3, 1) // not started: no worker takes them
	for i, s := range r.sims {
		r.dev.admit(s.message(s.initiation(t, uint32(i+1))))
	}
	if n := r.dev.Stats().HandshakeBacklog; n != 3 {
		t.Fatalf("backlog %d after admitting 3 initiations, want 3", n)
	}
	r.dev.Close()
	st := r.dev.Stats()
	if st.Drops[DropClosed] != 3 || st.Drops.Total() != 3 || st.HandshakeBacklog != 0 {
		t.Errorf("after Close: drops %v, backlog %d; want closed=3 alone, 0", st.Drops.List(), st.HandshakeBacklog)
	}
	r.dev.Close() // again: nothing more
	if got := r.dev.Stats().Drops[DropClosed]; got != 3 {
		t.Errorf("closed = %d after a second Close, want 3", got)
	}
}
