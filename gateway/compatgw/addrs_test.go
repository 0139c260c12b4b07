//go:build linux

package compatgw

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// TestAddressResubscriptionClosesSocket: each time a burst of address
// changes ends the address subscription (its socket overflowed while the
// follower was busy: ENOBUFS) and the gateway subscribes again, the ended
// subscription's netlink socket is closed: after three renewals the
// gateway's namespace holds the subscriptions it held at start, no more.
// Each renewal kept one open until Close. The burst overruns the other
// followers' subscriptions too (routes, sources, neighbours), which end
// and renew each on its own clock (srcaddr's routesResubscribe, a
// second; arp's resubscribeDelay, 100 ms): the process's open files,
// counted when the address follower logged a renewal, missed those still
// renewing (3 sockets fewer: one run in fifteen on a busy machine), so
// the check waits until each kind of subscription is back to its number
// at start, and counts the gateway's namespace's alone.
func TestAddressResubscriptionClosesSocket(t *testing.T) {
	var logs syncBuffer
	s := newSite(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	// Start returns subscribed: its followers subscribe before it does.
	start := testenv.NetlinkSubscriptions(t, s.gw.NsHandle())
	if !slices.Contains(start, unix.RTMGRP_IPV4_IFADDR|unix.RTMGRP_IPV6_IFADDR) {
		t.Fatalf("no netlink socket subscribed to the addresses in the gateway's namespace (groups %#x)", start)
	}
	const again = "following the WAN and LAN addresses again after their subscription ended"
	const rounds = 3
	for nth := 1; nth <= rounds; nth++ {
		// The follower stalls on the WAN's lock at the burst's first
		// update, so that the rest overruns the socket.
		func() {
			s.g.wanMu.Lock()
			defer s.g.wanMu.Unlock() // also on Fatal: Close waits for the follower
			testenv.AddressChurn(t, s.gw, s.wanDev)
		}()
		if !testenv.PollUntil(10*time.Second, func() bool { return strings.Count(logs.String(), again) >= nth }) {
			t.Fatalf("after %d bursts of address changes, %d renewals of the subscription; want %d (the burst did not overflow it?)\n%s", nth, strings.Count(logs.String(), again), nth, logs.String())
		}
	}
	var now []uint32
	if !testenv.PollUntil(15*time.Second, func() bool {
		now = testenv.NetlinkSubscriptions(t, s.gw.NsHandle())
		return slices.Equal(now, start)
	}) {
		t.Errorf("netlink subscriptions (their groups) in the gateway's namespace 15 s after %d renewals of the address subscription:\n%#x\nat start:\n%#x", rounds, now, start)
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
