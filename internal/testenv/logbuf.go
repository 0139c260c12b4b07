package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a buffer a logger writes to from several goroutines (a
// gateway's slog handler) while a test reads it: Write and String are
// safe for concurrent use. The zero value is empty and ready.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
