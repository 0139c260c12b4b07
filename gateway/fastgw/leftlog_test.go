//go:build linux

package fastgw

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestLeftLog: the deletions of routes of prefixes that left are said at
// once the first time, then at most once a minute with the count since
// and the first of them, not a line each.
func TestLeftLog(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, nil))
	var l leftLog
	t0 := time.Unix(1_800_000_000, 0)
	p := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)
	}
	l.note(log, p(0), 65536, t0)
	for i := 1; i <= 1000; i++ {
		l.note(log, p(i), 65536, t0.Add(time.Duration(i)*time.Millisecond*50))
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "deleted=1 first=198.19.0.0/32 kept=65536") {
		t.Fatalf("after 1,001 deletions within 50 s: %d lines, want the first alone:\n%s", len(lines), b.String())
	}
	l.note(log, p(2000), 65536, t0.Add(61*time.Second))
	lines = strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "deleted=1001 first=198.19.0.1/32") {
		t.Errorf("a minute on: %d lines, want a second with the 1,001 since:\n%s", len(lines), b.String())
	}
}
