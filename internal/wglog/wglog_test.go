package wglog

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lines returns the log's lines and the sum of their suppressed counts.
func lines(t *testing.T, b *bytes.Buffer) (n int, suppressed uint64) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		n++
		if _, v, ok := strings.Cut(l, "suppressed="); ok {
			s, err := strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			if err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			suppressed += s
		}
	}
	return n, suppressed
}

// TestErrorsLimited: a thousand errors of one kind at one instant give
// Burst lines; each Interval later gives one more, carrying the number
// left out, so that lines and suppressed counts add up to every error;
// another kind has a bucket of its own; verbose lines are not limited.
func TestErrorsLimited(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1e9, 0)
	log := newLogger(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), func() time.Time { return now })
	const failed = "%v - Failed to send data packets: %v"
	for i := range 1000 {
		log.Errorf(failed, "peer(AAAA…AAAA)", i)
	}
	if n, s := lines(t, &b); n != Burst || s != 0 {
		t.Fatalf("1000 errors at once: %d lines, %d suppressed; want %d lines\n%s", n, s, Burst, b.String())
	}
	now = now.Add(Interval)
	log.Errorf(failed, "peer(AAAA…AAAA)", "again")
	if n, s := lines(t, &b); n != Burst+1 || s != 1000-Burst {
		t.Fatalf("after an interval: %d lines, %d suppressed; want %d and %d\n%s", n, s, Burst+1, 1000-Burst, b.String())
	}
	log.Errorf(failed, "peer(AAAA…AAAA)", "dropped")
	log.Errorf("%v - Failed to send handshake initiation: %v", "peer(AAAA…AAAA)", "other kind")
	log.Verbosef("%v - Sending keepalive packet", "peer(AAAA…AAAA)")
	if n, _ := lines(t, &b); n != Burst+3 {
		t.Fatalf("another kind and a verbose line: %d lines, want %d\n%s", n, Burst+3, b.String())
	}
	// Quiet for long: the bucket fills up to Burst, no more.
	now = now.Add(time.Hour)
	b.Reset()
	for range 2 * Burst {
		log.Errorf(failed, "peer(AAAA…AAAA)", "burst")
	}
	if n, s := lines(t, &b); n != Burst || s != 1 {
		t.Fatalf("after an hour: %d lines, %d suppressed; want %d and 1 (the line left out before)\n%s", n, s, Burst, b.String())
	}
}

// TestKindsBounded: formats past maxKinds share one bucket; the table
// does not grow past it.
func TestKindsBounded(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := &limiter{now: func() time.Time { return now }, kinds: make(map[string]*bucket)}
	allowed := 0
	for i := range maxKinds + 100 {
		if ok, _ := l.allow("kind " + strconv.Itoa(i)); ok {
			allowed++
		}
	}
	if len(l.kinds) != maxKinds {
		t.Errorf("%d kinds in the table, want %d", len(l.kinds), maxKinds)
	}
	if want := maxKinds + Burst; allowed != want {
		t.Errorf("%d lines allowed, want %d (one a kind, then the shared bucket's burst)", allowed, want)
	}
}

// TestVerboseOffFormatsNothing: with debug lines off (the default), a
// verbose line costs no formatting: wireguard-go writes one for every
// datagram of an unknown type and every handshake message with a bad
// MAC1, which anyone can send to the listen port at line rate, and each
// was formatted (an allocation, and a peer's String for those naming
// one) only for the handler to drop it.
func TestVerboseOffFormatsNothing(t *testing.T) {
	var b bytes.Buffer
	log := New(slog.New(slog.NewTextHandler(&b, nil)))
	if n := testing.AllocsPerRun(100, func() { log.Verbosef("Received message with unknown type") }); n != 0 {
		t.Errorf("a verbose line with debug off: %v allocations, want 0", n)
	}
	if b.Len() != 0 {
		t.Errorf("a verbose line with debug off was written: %q", b.String())
	}
	dbg := New(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	dbg.Verbosef("Received message with unknown type %d", 7)
	if !strings.Contains(b.String(), "level=DEBUG msg=\"Received message with unknown type 7\"") {
		t.Errorf("a verbose line with debug on: logged %q", b.String())
	}
}
