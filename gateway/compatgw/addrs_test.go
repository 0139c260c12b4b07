package compatgw

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for concurrent use: a log handler's
// output read while the gateway logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openFDs is the number of the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestAddressResubscriptionClosesSocket: each time a burst of address
// changes ends the address subscription (its socket overflowed while the
// follower was busy: ENOBUFS) and the gateway subscribes again, the ended
// subscription's netlink socket is closed: the process's open files are as many after three
// renewals as before them (counted after a first one: the bind's sockets
// follow the churned addresses). Each renewal kept one open until Close.
func TestAddressResubscriptionClosesSocket(t *testing.T) {
	var logs syncBuffer
	s := newSite(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	const again = "following the WAN and LAN addresses again after their subscription ended"
	// renew churns the WAN's addresses and waits for the renewal of the
	// subscription it causes, the nth.
	renew := func(nth int) {
		t.Helper()
		// The follower stalls on the WAN's lock at the burst's first
		// update, so that the rest overruns the socket.
		func() {
			s.g.wanMu.Lock()
			defer s.g.wanMu.Unlock() // also on Fatal: Close waits for the follower
			testenv.AddressChurn(t, s.gw, s.wanDev)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(logs.String(), again) < nth && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := strings.Count(logs.String(), again); n < nth {
			t.Fatalf("after %d bursts of address changes, %d renewals of the subscription; want %d (the burst did not overflow it?)\n%s", nth, n, nth, logs.String())
		}
	}
	// A first renewal, for the files the churn makes the rest of the
	// gateway open or close (the bind's sockets follow the addresses).
	renew(1)
	fds := openFDs(t)
	const rounds = 3
	for round := 1; round <= rounds; round++ {
		renew(1 + round)
	}
	// The bind's sockets of the last burst's addresses close as the
	// follower catches up: on a busy machine that takes seconds. A leak
	// never closes.
	n := openFDs(t)
	for deadline := time.Now().Add(10 * time.Second); n > fds && time.Now().Before(deadline); n = openFDs(t) {
		time.Sleep(20 * time.Millisecond)
	}
	if n > fds {
		t.Errorf("%d open files after %d renewals of the address subscription, %d before them", n, rounds, fds)
	}
}
