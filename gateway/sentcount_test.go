package gateway

import (
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// TestSentCountsWhatTheMailboxTook: a control packet the dataplane's
// mailbox refuses is one drop, mailbox_full, and not sent as well: an
// initiation a handshake worker posts (runInitiation, SendWait), one the
// timers post inline (Send), a keepalive and a cookie reply. Before,
// initiations_sent and keepalives_sent counted each when it was made, so
// that a refused one was in both (wgpio_handshake_messages_sent_total
// {type="initiation"} and wgpio_control_drops_total{reason="mailbox_full"}).
func TestSentCountsWhatTheMailboxTook(t *testing.T) {
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820"})
	refused := func(what string, sent func(Stats) uint64, send func()) {
		t.Helper()
		before := r.dev.Stats()
		r.f.mailboxFull.Store(true)
		send()
		r.f.mailboxFull.Store(false)
		after := r.dev.Stats()
		if got, full := sent(after)-sent(before), after.Drops[DropMailboxFull]-before.Drops[DropMailboxFull]; got != 0 || full != 1 {
			t.Errorf("%s the mailbox refused: sent +%d, mailbox_full +%d; want +0, +1", what, got, full)
		}
	}
	initiations := func(s Stats) uint64 { return s.InitiationsSent }
	// No session: a keepalive starts a handshake, inline before Start.
	refused("an initiation posted inline", initiations, func() { r.dev.SendKeepalive(r.wgPub) })

	// The handshake pool's: the timers queue it, a worker posts it (the
	// clock past the RekeyTimeout limit, no Tick).
	r.f.clock.Add(int64(2 * protocol.RekeyTimeout))
	r.dev.pool.async.Store(true)
	refused("an initiation a worker posted", initiations, func() {
		r.dev.SendKeepalive(r.wgPub)
		var batch [initBatch]*peer
		n, _ := r.dev.pool.pop(batch[:])
		if n != 1 {
			t.Fatalf("%d initiations queued, want 1", n)
		}
		r.dev.runInitiation(batch[0])
	})
	r.dev.pool.async.Store(false)

	r.f.clock.Add(int64(2 * protocol.RekeyTimeout))
	r.establishAsInitiator()
	refused("a keepalive", func(s Stats) uint64 { return s.KeepalivesSent }, func() { r.dev.SendKeepalive(r.wgPub) })

	// Under load, an initiation without MAC2 is answered with a cookie
	// reply at admission.
	l := newLightRig(t, 1, 1)
	l.f.load.Store(true)
	before := l.dev.Stats()
	l.f.mailboxFull.Store(true)
	s := l.sims[0]
	l.dev.admit(s.message(s.initiation(t, 1)))
	after := l.dev.Stats()
	if got, full := after.CookieRepliesSent-before.CookieRepliesSent, after.Drops[DropMailboxFull]-before.Drops[DropMailboxFull]; got != 0 || full != 1 {
		t.Errorf("a cookie reply the mailbox refused: sent +%d, mailbox_full +%d; want +0, +1", got, full)
	}
}
