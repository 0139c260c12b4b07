//go:build linux

package fastgw

import (
	"log/slog"
	"net/netip"
	"time"
)

// leftLogEvery is the least time between two of leftLog's lines.
const leftLogEvery = time.Minute

// leftLog says, at most once a leftLogEvery, how many routes of prefixes
// that left the configuration the route worker deleted because more left
// than are kept (deleteLeft): a gateway whose peers keep getting new
// prefixes (a pool of /128s handed out without end) meets the bound at
// every change, and a line per prefix, even capped per change, made most
// of its log (3,278 lines in 12 minutes of a soak). The first deletion is
// said at once; those after it are counted and said with the next line
// due. The zero value is ready; guarded by routeMu.
type leftLog struct {
	last  time.Time    // when the last line was written (zero: never)
	n     int          // deletions not said yet
	first netip.Prefix // the first of them
}

// note counts the deletion of p's route at now and writes the line when
// one is due (kept: how many prefixes that left are kept).
func (l *leftLog) note(log *slog.Logger, p netip.Prefix, kept int, now time.Time) {
	if l.n == 0 {
		l.first = p
	}
	l.n++
	if !l.last.IsZero() && now.Sub(l.last) < leftLogEvery {
		return
	}
	log.Info("too many prefixes that left the configuration: the routes into the exception TUN of those that left first are deleted, the LAN's traffic to them follows the host's other routes (said at most once a minute)",
		"deleted", l.n, "first", l.first, "kept", kept)
	l.last, l.n = now, 0
}
