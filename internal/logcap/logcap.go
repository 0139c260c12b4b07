package logcap

import (
	"context"
	"log/slog"
)

// Log logs, per kind (the message), the first Max lines of an operation
// and counts the others; Flush ends the operation with one line per kind
// that had more. Not safe for concurrent use: its owner's lock guards it.
// New makes one; the zero value is not usable.
type Log struct {
	log   *slog.Logger
	max   int
	kinds map[string]*kind
	order []string // the messages of kinds, in the order first logged
}

type kind struct {
	n     int
	level slog.Level
}

// New returns a Log writing to log at most max lines of a kind per
// operation (before Flush).
func New(log *slog.Logger, max int) *Log {
	return &Log{log: log, max: max, kinds: map[string]*kind{}}
}

// Warn logs msg at warning level, unless Max lines of msg were logged
// since the last Flush; args are slog's key-value pairs.
func (l *Log) Warn(msg string, args ...any) { l.Log(slog.LevelWarn, msg, args...) }

// Debug is Warn at debug level.
func (l *Log) Debug(msg string, args ...any) { l.Log(slog.LevelDebug, msg, args...) }

// Log logs msg at level, unless Max lines of msg were logged since the
// last Flush.
func (l *Log) Log(level slog.Level, msg string, args ...any) {
	k := l.kinds[msg]
	if k == nil {
		k = &kind{level: level}
		l.kinds[msg] = k
		l.order = append(l.order, msg)
	}
	k.n++
	if k.n <= l.max {
		l.log.Log(context.Background(), level, msg, args...)
	}
}

// Flush logs, for each kind with more than Max lines since the last
// Flush, one line at its level: the message, "more" (the lines not
// logged) and "total"; then it starts a new operation.
func (l *Log) Flush() {
	for _, msg := range l.order {
		k := l.kinds[msg]
		if k.n > l.max {
			l.log.Log(context.Background(), k.level, msg+" (more of the same, not logged one by one)", "more", k.n-l.max, "total", k.n)
		}
	}
	clear(l.kinds)
	l.order = l.order[:0]
}
