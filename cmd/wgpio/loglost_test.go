//go:build linux

package main

import (
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
)

// TestLogLinesLost: the logger's lines written into a pipe whose reader
// is gone are each counted once, lost; those written before are not.
func TestLogLinesLost(t *testing.T) {
	// (A pipe not on fd 1 or 2: the write fails with EPIPE, as it does
	// on stderr under survivePipe, without Go's SIGPIPE exit.)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var lost atomic.Uint64
	log := slog.New(slog.NewTextHandler(lossCountingWriter{w, &lost}, nil))
	log.Info("read", "n", 1)
	if got := lost.Load(); got != 0 {
		t.Fatalf("%d lines lost with the reader there, want 0", got)
	}
	r.Close()
	for i := range 3 {
		log.Warn("into a broken pipe", "i", i)
	}
	if got := lost.Load(); got != 3 {
		t.Errorf("%d lines lost of 3 written after the reader went, want 3", got)
	}
}
