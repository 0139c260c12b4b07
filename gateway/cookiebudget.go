package gateway

import (
	"sync"
	"time"
)

// Global bound on cookie replies (an implementation choice: neither the
// whitepaper nor the kernel bounds them). A cookie reply answers a source
// that has not proven its address, so the limit cannot be per source without
// state an attacker can grow at will; one token bucket over all sources
// bounds what a flood of spoofed initiations can make us send instead. A
// reply (64 bytes) is smaller than the initiation (148) or response (92) it
// answers, so it amplifies nothing; the bound is set so that a reconnect
// storm of ten thousand legitimate peers gets its cookies in one round
// (each then retries with MAC2 after REKEY_TIMEOUT, §5.3, §6.4).
const (
	// CookieRepliesPerSecond is the steady rate of cookie replies, all
	// sources together: at 64 bytes each, about 10 Mbit/s.
	CookieRepliesPerSecond = 20000
	// CookieReplyBurst is how many may leave at once after a quiet spell.
	CookieReplyBurst = 10000

	cookieCost      = int64(time.Second) / CookieRepliesPerSecond // ns of credit per reply
	cookieMaxTokens = cookieCost * CookieReplyBurst
)

// cookieBudget is a token bucket in ns of credit on the device's clock. The
// zero value is full at its first use. Safe for concurrent use (its own
// lock: the handshake workers share it).
type cookieBudget struct {
	mu      sync.Mutex
	tokens  int64
	last    int64
	started bool
}

// allow reports whether one more cookie reply may be sent at now (ns) and
// takes its cost if so.
func (b *cookieBudget) allow(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started, b.tokens, b.last = true, cookieMaxTokens, now
	}
	if d := now - b.last; d > 0 {
		b.tokens = min(b.tokens+d, cookieMaxTokens)
	}
	b.last = now
	if b.tokens < cookieCost {
		return false
	}
	b.tokens -= cookieCost
	return true
}
