package logcap

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLog(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	l := New(slog.New(h), 2)
	for i := range 100000 {
		l.Warn("route failed", "prefix", i)
	}
	l.Debug("interface down", "prefix", 7)
	l.Flush()
	l.Warn("route failed", "prefix", 1) // a new operation
	l.Flush()
	want := []string{
		`level=WARN msg="route failed" prefix=0`,
		`level=WARN msg="route failed" prefix=1`,
		`level=DEBUG msg="interface down" prefix=7`,
		`level=WARN msg="route failed (more of the same, not logged one by one)" more=99998 total=100000`,
		`level=WARN msg="route failed" prefix=1`,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(buf.String()), "\n")); diff != "" {
		t.Errorf("log mismatch (-want +got):\n%s", diff)
	}
}
