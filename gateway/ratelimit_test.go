package gateway

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// legitInitiator plays wireguard-go's side of a handshake under load with
// package noise: it keeps the cookie of a cookie reply and sends
// initiations carrying MAC2.
func legitInitiator(t *testing.T, r *rig) *noise.Handshake {
	t.Helper()
	return noise.NewHandshake(noise.NewStaticIdentity(r.wgKey, nil), r.ourKey.PublicKey(), r.psk)
}

func initiation(t *testing.T, h *noise.Handshake) []byte {
	t.Helper()
	var msg [noise.InitiationSize]byte
	if err := h.CreateInitiation(&msg, 7); err != nil {
		t.Fatal(err)
	}
	return msg[:]
}

// getCookie sends h's initiation from src under load and consumes the
// cookie reply it must get.
func getCookie(t *testing.T, r *rig, h *noise.Handshake, src netip.AddrPort) {
	t.Helper()
	mark := r.f.nsent()
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: initiation(t, h)})
	cr := ofType(r.f.sentSince(mark), noise.TypeCookieReply, noise.CookieReplySize)
	if len(cr) != 1 {
		t.Fatalf("initiation without MAC2 under load: sent %v, want one cookie reply", types(r.f.sentSince(mark)))
	}
	if err := h.ConsumeCookieReply(cr[0].payload); err != nil {
		t.Fatalf("ConsumeCookieReply: %v", err)
	}
}

// TestRateLimitAfterMAC2: under load, cookie replies to a source that has
// not proven its address are not limited per source (no state is kept for
// it); once its MAC2 is valid the source is limited by noise.SourceLimiter
// (burst 5, 20/s), as the kernel's cookie.c orders it.
func TestRateLimitAfterMAC2(t *testing.T) {
	r := newRig(t, rigOptions{})
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	r.f.load.Store(true)
	h := legitInitiator(t, r)

	unproven := initiation(t, h)
	mark := r.f.nsent()
	for range 10 {
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: unproven})
	}
	if n := len(ofType(r.f.sentSince(mark), noise.TypeCookieReply, 0)); n != 10 {
		t.Errorf("cookie replies to 10 initiations without MAC2 = %d, want 10 (no per-source limit before MAC2)", n)
	}
	if n := r.dev.limiter.Len(); n != 0 {
		t.Errorf("limiter entries after unproven sources = %d, want 0", n)
	}

	getCookie(t, r, h, src)
	proven := initiation(t, h)
	mark = r.f.nsent()
	for range 10 {
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: proven})
	}
	if n := len(ofType(r.f.sentSince(mark), noise.TypeResponse, 0)); n != 1 {
		t.Errorf("responses to 10 copies of an initiation with MAC2 = %d, want 1", n)
	}
	if got := r.dev.Stats().Drops[DropRateLimited]; got != 10-noise.SourceBurst {
		t.Errorf("Drops[rate limited] = %d, want %d (burst %d)", got, 10-noise.SourceBurst, noise.SourceBurst)
	}
	r.f.clock.Add(int64(time.Second / noise.SourceRate))
	before := r.dev.Stats().Drops[DropRateLimited]
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: proven})
	if got := r.dev.Stats().Drops[DropRateLimited]; got != before {
		t.Errorf("one more after %v was rate limited, want let through", time.Second/noise.SourceRate)
	}
}

// TestSpoofedFloodBounded: 1,000,000 initiations with a valid MAC1 from as
// many spoofed sources, under load, within 0.9 s of the device's clock:
// cookie replies stay within the global budget, no per-source state is
// kept, the heap does not grow with the number of sources, and a peer that
// proved its address (MAC2 from an earlier cookie) completes its handshake
// in the middle of the flood.
func TestSpoofedFloodBounded(t *testing.T) {
	const (
		sources = 1_000_000
		gap     = 900 // ns of the device's clock between two messages
	)
	r := newRig(t, rigOptions{})
	r.f.load.Store(true)
	legitSrc := netip.MustParseAddrPort("198.19.255.254:51820")
	h := legitInitiator(t, r)
	getCookie(t, r, h, legitSrc)
	r.f.drop.Store(true) // nothing to wireguard-go: the cookie replies go to spoofed sources

	spoofed := r.wgInitiation(t) // valid MAC1, no MAC2
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mark := r.f.nsent()
	legitAt := sources / 2
	for i := range sources {
		// 198.18.0.0/15 (2^17 addresses) × ports.
		a := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)})
		src := netip.AddrPortFrom(a, uint16(1024+i>>17))
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: spoofed})
		r.f.clock.Add(gap)
		if i == legitAt {
			m := r.f.nsent()
			r.dev.HandleMessage(fastpath.HandshakeMessage{Src: legitSrc, Data: initiation(t, h)})
			if n := len(ofType(r.f.sentSince(m), noise.TypeResponse, 0)); n != 1 {
				t.Errorf("legitimate initiation with MAC2 in the flood: sent %v, want a response; stats %+v", types(r.f.sentSince(m)), r.dev.Stats())
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	replies := uint64(len(ofType(r.f.sentSince(mark), noise.TypeCookieReply, 0)))
	elapsed := time.Duration(sources * gap)
	maxReplies := uint64(CookieReplyBurst + int(elapsed.Seconds()*CookieRepliesPerSecond) + 1)
	if replies > maxReplies || replies < CookieReplyBurst {
		t.Errorf("cookie replies to %d spoofed sources in %v = %d, want between %d and %d", sources, elapsed, replies, CookieReplyBurst, maxReplies)
	}
	if got := r.dev.Stats().Drops[DropCookieBudget]; got != sources-replies {
		t.Errorf("Drops[cookie budget] = %d, want %d", got, sources-replies)
	}
	if n := r.dev.limiter.Len(); n > 1 {
		t.Errorf("limiter entries = %d, want at most 1 (the proven peer)", n)
	}
	const heapCap = 8 << 20
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > heapCap {
		t.Errorf("heap grew %d bytes over %d spoofed sources, want under %d", grew, sources, heapCap)
	}
}
