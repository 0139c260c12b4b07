//go:build linux

package linkfollow

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestStateLogFlapping: a link that flaps is logged FlapLines times a
// FlapWindow; the changes past that are counted, and at the window's end
// one line tells how many and the state then (down: a warning), so that
// the last line logged always says how the link is. 20 flaps made 40
// lines of some 600 bytes each.
func TestStateLogFlapping(t *testing.T) {
	var out strings.Builder
	now := time.Unix(1000, 0)
	var due []func()
	s := &StateLog{Log: slog.New(slog.NewTextHandler(&out, nil)), What: "WAN", Counted: "link_down",
		now:   func() time.Time { return now },
		after: func(d time.Duration, f func()) { due = append(due, f) }}
	attrs := func(up bool) netlink.LinkAttrs {
		a := netlink.LinkAttrs{Index: 7, Name: "eth0", Flags: net.FlagUp}
		if up {
			a.RawFlags = unix.IFF_LOWER_UP
		}
		return a
	}
	s.Note(attrs(true)) // first seen up: nothing
	for range 20 {
		s.Note(attrs(false))
		s.Note(attrs(true))
		now = now.Add(50 * time.Millisecond)
	}
	s.Note(attrs(false)) // ends down
	if n := strings.Count(out.String(), "\n"); n != FlapLines {
		t.Fatalf("%d lines for 41 changes in a second, want %d:\n%s", n, FlapLines, out.String())
	}
	if len(due) != 1 {
		t.Fatalf("%d summaries due, want 1", len(due))
	}
	now = now.Add(FlapWindow)
	due[0]()
	last := out.String()[strings.LastIndex(strings.TrimSuffix(out.String(), "\n"), "\n")+1:]
	if !strings.Contains(last, "level=WARN") || !strings.Contains(last, "WAN link flapping") || !strings.Contains(last, "down now") || !strings.Contains(last, "changes_not_logged=37") {
		t.Errorf("summary = %q, want a warning: 37 changes not logged, down now", last)
	}
	// A new window: the next change is logged again.
	s.Note(attrs(true))
	if !strings.Contains(out.String()[len(out.String())-200:], "WAN link up again") {
		t.Errorf("after the window the next change was not logged:\n%s", out.String())
	}
}
