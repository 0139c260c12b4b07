package gateway

import "time"

// Global bound on cookie replies (an implementation choice: neither the
// whitepaper nor the kernel bounds them). A cookie reply answers a source
// that has not proven its address, so the limit cannot be per source without
// state an attacker can grow at will; one token bucket over all sources
// bounds what a flood of spoofed initiations can make us send instead.
const (
	// CookieRepliesPerSecond is the steady rate of cookie replies, all
	// sources together: at 64 bytes each, about 2.6 Mbit/s.
	CookieRepliesPerSecond = 5000
	// CookieReplyBurst is how many may leave at once after a quiet spell.
	CookieReplyBurst = 1000

	cookieCost      = int64(time.Second) / CookieRepliesPerSecond // ns of credit per reply
	cookieMaxTokens = cookieCost * CookieReplyBurst
)

// cookieBudget is a token bucket in ns of credit on the device's clock. The
// zero value is full at its first use. Guarded by Device.mu.
type cookieBudget struct {
	tokens  int64
	last    int64
	started bool
}

// allow reports whether one more cookie reply may be sent at now (ns) and
// takes its cost if so.
func (b *cookieBudget) allow(now int64) bool {
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
