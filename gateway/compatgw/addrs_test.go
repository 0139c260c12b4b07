//go:build linux

package compatgw

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"
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

// netlinkAddrReaders is how many goroutines run netlink's address
// subscription reader.
func netlinkAddrReaders() int {
	b := make([]byte, 1<<20)
	for {
		n := runtime.Stack(b, true)
		if n < len(b) {
			return strings.Count(string(b[:n]), "netlink.addrSubscribeAt.func")
		}
		b = make([]byte, 2*len(b))
	}
}

// TestCloseDuringAddressBurst: a gateway closed while a burst of address
// changes waits in its subscription's channel (the follower stalled on
// the WAN's lock, the channel full) leaves no netlink reader behind: the
// follower takes what the reader still hands over once its socket is
// closed. The reader waited forever to hand over an update: whether the
// follower, let go after Close, first took enough of the burst for the
// reader to reach its socket's overflow (and end) depends on its select,
// so five gateways are closed this way, in turn.
func TestCloseDuringAddressBurst(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), closeDuringAddressBurst)
	}
}

func closeDuringAddressBurst(t *testing.T) {
	before := netlinkAddrReaders()
	s := newSite(t)
	testenv.PollUntil(5*time.Second, func() bool { return netlinkAddrReaders() > before })
	if n := netlinkAddrReaders(); n <= before {
		t.Fatalf("%d netlink address readers with the gateway running, %d before it: the stack's name changed?", n, before)
	}
	closed := make(chan error, 1)
	func() {
		s.g.wanMu.Lock()
		defer s.g.wanMu.Unlock() // also on Fatal: Close waits for the follower
		testenv.AddressChurn(t, s.gw, s.wanDev)
		go func() { closed <- s.g.Close() }()
		time.Sleep(50 * time.Millisecond) // Close's stop closed before the follower goes on (or not: either way)
	}()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s")
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return netlinkAddrReaders() <= before }) {
		t.Errorf("%d netlink address readers 10 s after Close, %d before the gateway started", netlinkAddrReaders(), before)
	}
}
