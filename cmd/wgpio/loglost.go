//go:build linux

package main

import (
	"io"
	"sync/atomic"
)

// logLinesLost counts the log lines this process's gateway could not
// write: its standard error's reader gone (`wgpio up ... 2>&1 | head`, a
// tee that died: the write fails with EPIPE, survivePipe), or a file
// behind it that refused the write (a full disk). slog's handlers write
// a record with one call, so a failed write is one line lost whole.
// `wgpio stats` and /metrics report it (GatewayStats.LogLinesLost).
var logLinesLost atomic.Uint64

// lossCountingWriter is w with every failed write counted in lost.
type lossCountingWriter struct {
	w    io.Writer
	lost *atomic.Uint64
}

func (c lossCountingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if err != nil {
		c.lost.Add(1)
	}
	return n, err
}
