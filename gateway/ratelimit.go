package gateway

import (
	"net/netip"
	"time"
)

// Per-source rate limit of handshake initiations while under load, the
// token bucket of wireguard-go's ratelimiter package (20 per second, burst
// 5, per IPv4 address or IPv6 /64), on the device's injected clock.
const (
	rateLimitPerSecond = 20
	rateLimitBurst     = 5
	rateLimitGCAfter   = int64(time.Second)
	tokenCost          = int64(time.Second) / rateLimitPerSecond // ns of credit per packet
	maxTokens          = tokenCost * rateLimitBurst
)

type bucket struct {
	tokens int64 // ns of credit
	last   int64
}

// rateLimiter is guarded by Device.mu.
type rateLimiter struct {
	buckets map[netip.Addr]*bucket
	lastGC  int64
}

func (r *rateLimiter) init() { r.buckets = make(map[netip.Addr]*bucket) }

// allow reports whether one more initiation from src may be processed now.
func (r *rateLimiter) allow(src netip.Addr, now int64) bool {
	if now-r.lastGC > rateLimitGCAfter {
		for k, b := range r.buckets {
			if now-b.last > rateLimitGCAfter {
				delete(r.buckets, k)
			}
		}
		r.lastGC = now
	}
	k := addrKey(src)
	b := r.buckets[k]
	if b == nil {
		r.buckets[k] = &bucket{tokens: maxTokens - tokenCost, last: now}
		return true
	}
	b.tokens += now - b.last
	b.last = now
	if b.tokens > maxTokens {
		b.tokens = maxTokens
	}
	if b.tokens < tokenCost {
		return false
	}
	b.tokens -= tokenCost
	return true
}
