// Package wglog gives stock wireguard-go (the compat modes) a
// device.Logger that writes to a log/slog.Logger and limits the rate of
// its error lines.
//
// wireguard-go logs one error line for every batch it fails to send
// ("peer(…) - Failed to send data packets: …"): with the WAN down, its
// address gone or its next hop silent, that is a line per packet at low
// rates and tens of thousands a second at high ones, which drowns the
// gateway's own messages and, under journald's per-service limit
// (RateLimitBurst, 10,000 lines per 30 s by default), has every line of
// the service dropped, the gateway's own warnings among them. So each
// kind of error line (its format string: the same text for every peer)
// is logged at most Burst times at once and then once per Interval, as
// Linux's net_ratelimit limits the kernel's messages; the next line of a
// kind after some were left out carries their number
// ("suppressed=N"). The drops themselves are counted where they happen
// (the bind's and tundev's counters), not here. Debug lines
// (Verbosef) are passed on unlimited: they are off unless asked for, and
// off they cost no formatting (wireguard-go writes one for every datagram
// of an unknown type or with a bad MAC1, which anyone can send).
package wglog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"golang.zx2c4.com/wireguard/device"
)

const (
	// Burst is how many error lines of one kind are logged at once.
	Burst = 10
	// Interval is the time that gives one more line of a kind, up to
	// Burst.
	Interval = time.Second
	// maxKinds bounds the table of kinds. wireguard-go has some fifty
	// error formats; formats past the bound share one bucket.
	maxKinds = 256
)

// New returns a logger for device.NewDevice that writes wireguard-go's
// error lines to log at warning level, limited as the package says, and
// its verbose lines at debug level. It is safe for concurrent use (one
// mutex around the table, taken on error lines only).
func New(log *slog.Logger) *device.Logger {
	return newLogger(log, time.Now)
}

// newLogger is New with a clock of the caller's.
func newLogger(log *slog.Logger, now func() time.Time) *device.Logger {
	l := &limiter{now: now, kinds: make(map[string]*bucket)}
	return &device.Logger{
		Verbosef: func(format string, a ...any) {
			// Formatted only when written: wireguard-go writes some
			// for every bad datagram anyone sends.
			if log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug(fmt.Sprintf(format, a...))
			}
		},
		Errorf: func(format string, a ...any) {
			ok, suppressed := l.allow(format)
			if !ok {
				return
			}
			if suppressed > 0 {
				log.Warn(fmt.Sprintf(format, a...), "suppressed", suppressed)
				return
			}
			log.Warn(fmt.Sprintf(format, a...))
		},
	}
}

// limiter holds a token bucket per kind of line (golang.org/x/time/rate,
// Burst tokens, one more per Interval).
type limiter struct {
	now   func() time.Time
	mu    sync.Mutex
	kinds map[string]*bucket // by format string; at most maxKinds
	other *bucket            // the formats past maxKinds
}

// bucket is one kind's tokens and the lines it left out since its last
// line.
type bucket struct {
	tokens     *rate.Limiter
	suppressed uint64
}

func newBucket() *bucket { return &bucket{tokens: rate.NewLimiter(rate.Every(Interval), Burst)} }

// allow reports whether a line of kind format may be logged now and, if
// so, how many of its kind were left out since its last line.
func (l *limiter) allow(format string) (ok bool, suppressed uint64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.kinds[format]
	if b == nil {
		if len(l.kinds) >= maxKinds {
			if l.other == nil {
				l.other = newBucket()
			}
			b = l.other
		} else {
			b = newBucket()
			l.kinds[format] = b
		}
	}
	if !b.tokens.AllowN(now, 1) {
		b.suppressed++
		return false, 0
	}
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}
