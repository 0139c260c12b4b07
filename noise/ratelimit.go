package noise

import (
	"net/netip"
	"sync"
	"time"
)

// Per-source limits of handshake messages (the Linux kernel's
// drivers/net/wireguard/ratelimiter.c; wireguard-go ratelimiter): a token
// bucket per source refilled at SourceRate messages per second and holding
// at most SourceBurst.
const (
	SourceRate  = 20 // handshake messages per second per source
	SourceBurst = 5  // messages a quiet source may send at once
	// SourceLimiterMaxEntries caps the sources tracked at once; a new source
	// beyond it is refused until idle entries are swept (the kernel refuses
	// likewise when its table is full).
	SourceLimiterMaxEntries = 1 << 16

	sourceCost      = int64(time.Second) / SourceRate // ns of tokens per message
	sourceMaxTokens = sourceCost * SourceBurst
	sourceSweep     = time.Second // entries idle this long are full buckets: forgotten
)

// SourceLimiter decides whether a handshake message from a source address
// may be processed. The caller asks it when under load, after
// CookieChecker.Check accepted the message, so that only sources proven by
// a valid MAC2 spend tokens (wireguard-go's RoutineHandshake order). IPv4
// sources are
// limited per address; IPv6 sources per /64, as the kernel does (wireguard-go
// keys on the full address), since one host commonly holds a whole /64.
// IPv4-mapped IPv6 addresses count as IPv4. A message is allowed when the
// bucket holds at least one message's worth of tokens (the kernel's rule;
// wireguard-go requires strictly more, so its burst is one less).
//
// It runs on the injected clock, starts no goroutine (idle entries are
// swept during calls, at most once per second) and is safe for concurrent
// use. The zero value is not usable; make one with NewSourceLimiter.
type SourceLimiter struct {
	clock func() time.Time

	mu        sync.Mutex
	table     map[netip.Addr]sourceBucket // guarded by mu
	lastSweep time.Time                   // guarded by mu
}

type sourceBucket struct {
	last   time.Time
	tokens int64 // ns
}

// NewSourceLimiter returns an empty limiter on clock (nil: time.Now).
func NewSourceLimiter(clock func() time.Time) *SourceLimiter {
	if clock == nil {
		clock = time.Now
	}
	return &SourceLimiter{clock: clock, table: make(map[netip.Addr]sourceBucket), lastSweep: clock()}
}

func sourceKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Allow reports whether a handshake message from src may be processed now,
// and takes its cost from src's bucket if so.
func (l *SourceLimiter) Allow(src netip.Addr) bool {
	key := sourceKey(src)
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sourceSweep {
		for k, b := range l.table {
			if now.Sub(b.last) >= sourceSweep {
				delete(l.table, k)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.table[key]
	if !ok {
		if len(l.table) >= SourceLimiterMaxEntries {
			return false
		}
		l.table[key] = sourceBucket{last: now, tokens: sourceMaxTokens - sourceCost}
		return true
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.tokens+int64(d), sourceMaxTokens)
	}
	b.last = now
	allowed := b.tokens >= sourceCost
	if allowed {
		b.tokens -= sourceCost
	}
	l.table[key] = b
	return allowed
}

// Len returns how many sources are tracked.
func (l *SourceLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.table)
}
