package gateway

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// TestRetryFromInitiationSent: an initiation that waited in the handshake
// pool's queue (a storm's backlog) arms its retry when it leaves, not
// when the timers asked for it: two initiations to a peer never leave
// less than REKEY_TIMEOUT apart (whitepaper §6.1, "under no
// circumstances"), and the peer's response to the first is not made
// stale by a retry sent right behind it. The test plays the pool by hand
// (async, no workers): the initiation asked for at 0 leaves at 4.5 s.
func TestRetryFromInitiationSent(t *testing.T) {
	r := newLightRig(t, 1, 1)
	r.dev.opts.Jitter = func() time.Duration { return 0 }
	r.dev.pool.async.Store(true)
	s := r.sims[0]
	fp := r.dev.FastPeer(s.pub)
	fp.Endpoint.Store(&fastpath.Endpoint{Dst: s.src, Src: netip.MustParseAddr("198.18.0.1")})
	fp.HandshakeNeeded.Store(true)
	start := r.now()
	r.dev.Tick(r.now())
	drain := func() {
		var batch [initBatch]*peer
		for {
			n, _ := r.dev.pool.pop(batch[:])
			if n == 0 {
				return
			}
			for _, p := range batch[:n] {
				r.dev.runInitiation(p)
			}
		}
	}
	r.f.clock.Add(int64(4500 * time.Millisecond))
	r.dev.Tick(r.now())
	drain() // the backlog clears: the initiation leaves at 4.5 s
	for r.now() < start+int64(20*time.Second) {
		r.f.clock.Add(int64(100 * time.Millisecond))
		r.dev.Tick(r.now())
		drain()
	}
	ini := ofType(r.f.sentSince(0), noise.TypeInitiation, noise.InitiationSize)
	if len(ini) < 2 {
		t.Fatalf("initiations in 20 s without an answer: %v, want retries", types(r.f.sentSince(0)))
	}
	for i := 1; i < len(ini); i++ {
		if gap := ini[i].at - ini[i-1].at; gap < int64(protocol.RekeyTimeout) {
			t.Fatalf("initiations %d and %d left %.1f s apart, less than REKEY_TIMEOUT: %v", i-1, i, secs(gap), types(ini))
		}
	}
}
