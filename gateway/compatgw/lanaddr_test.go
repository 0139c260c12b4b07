//go:build linux

package compatgw

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestNoLANAddressWarned: a compat gateway whose LAN has no address (a
// user who took the gateway to need none, as it needs none on a Linux
// router's wg0) starts with a warning that names the interface, what
// fails and the fix, as fast-path mode does; and what it says fails does:
// host B's pings to host A are dropped as off_lan (no route toward them
// leads out of the LAN), unanswered. The
// address added while running is followed (host A reaches host B), and
// removing it again is warned about once more. It started silently.
func TestNoLANAddressWarned(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	s, err := twosite.Build(testenv.Topology(t, "cna"), twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	run := func(args ...string) {
		t.Helper()
		if out, err := s.GwA.Run("ip", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	run("address", "flush", "dev", s.LANA)
	fc, f := s.FastConfig, compatFile(s)
	var logs testenv.LogBuffer
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	const warning = "LAN has no IPv4 or global IPv6 address"
	wants := []string{warning, "no router address", "off_lan", "interface=" + s.LANA, `fix="ip addr add ADDRESS/PREFIX dev ` + s.LANA + `"`}
	for _, want := range wants {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("started with LAN %s without an address: the log does not hold %q:\n%s", s.LANA, want, logs.String())
		}
	}
	// What the warning says: the kernel has no route toward the LAN's
	// hosts on the LAN, so the decrypted packets for them are dropped.
	if !testenv.PollUntil(15*time.Second, func() bool {
		s.HostB.Run("ping", "-c", "1", "-W", "1", twosite.HostA4.String())
		return g.Stats().LAN.Drops[tundev.PortDropOffLAN] > 0
	}) {
		t.Errorf("host B's pings to host A with the LAN's address gone: LAN device drops %v, want off_lan", g.Stats().LAN.Drops.List())
	}
	run("address", "add", twosite.LANA4.String()+"/24", "dev", s.LANA)
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Errorf("after the LAN's address was added: %v", err)
	}
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("with the LAN's address added back, %d warnings; want the one of start:\n%s", n, logs.String())
	}
	run("address", "flush", "dev", s.LANA)
	if !testenv.PollUntil(10*time.Second, func() bool { return strings.Count(logs.String(), warning) == 2 }) {
		t.Errorf("LAN address removed while running: %d warnings, want 2 (start, removal):\n%s", strings.Count(logs.String(), warning), logs.String())
	}
}

// linkLocalSite builds two sites with compat gateways (site A's not
// started) and flushes site A's LAN link-local addresses.
func linkLocalSite(t *testing.T, prefix string) *twosite.Site {
	t.Helper()
	testenv.Short(t, "builds namespaces and runs two gateways")
	s, err := twosite.Build(testenv.Topology(t, prefix), twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if out, err := s.GwA.Run("ip", "-6", "address", "flush", "dev", s.LANA, "scope", "link"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return s
}

// startA starts site A's compat gateway, logging into logs; closed with
// the test.
func startA(t *testing.T, s *twosite.Site, logs *testenv.LogBuffer) *Gateway {
	t.Helper()
	fc, f := s.FastConfig, compatFile(s)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestAddressAddedBeforeFollowing: an address the LAN gets between
// Start's reading of the interfaces and the address follower's
// subscription (at boot, while the network comes up, or a link-local
// address whose duplicate address detection ends then) is followed: the
// follower reads both interfaces once when it starts. Before, its update
// came before anyone listened and nothing else came: the gateway kept
// answering link-local LAN hosts from no address (TestRouterStock's
// link-local source failed so in CI).
func TestAddressAddedBeforeFollowing(t *testing.T) {
	s := linkLocalSite(t, "cnf")
	ll := netip.MustParseAddr("fe80::99")
	beforeFollow = func() {
		if out, err := s.GwA.Run("ip", "-6", "address", "add", ll.String()+"/64", "dev", s.LANA, "nodad"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	t.Cleanup(func() { beforeFollow = nil })
	var logs testenv.LogBuffer
	g := startA(t, s, &logs)
	if !testenv.PollUntil(5*time.Second, func() bool { return g.lanDev.ICMPLinkLocal() == ll }) {
		t.Errorf("the LAN got %v before the follower subscribed: the LAN device's link-local source is %v 5 s after start, want it", ll, g.lanDev.ICMPLinkLocal())
	}
}

// TestAddressReReadRetried: an address change whose re-reads of the
// interface fail (ENOBUFS or ENOMEM while the kernel builds the dump, or
// a dump interrupted again and again by more changes) is followed once a
// re-read succeeds: a link-local address added to the LAN becomes the
// source of the LAN device's ICMPv6 errors to link-local hosts. Before,
// the failed re-read was logged and dropped, and the change waited for
// another address change on the LAN.
func TestAddressReReadRetried(t *testing.T) {
	s := linkLocalSite(t, "cnr")
	var (
		mu           sync.Mutex
		left, failed int
	)
	readIfaceHook = func(name string) error {
		mu.Lock()
		defer mu.Unlock()
		if name != s.LANA || left == 0 {
			return nil
		}
		left--
		failed++
		return fmt.Errorf("list addresses of %s: %w", name, syscall.ENOBUFS)
	}
	t.Cleanup(func() { readIfaceHook = nil }) // after the gateway's Close, registered later
	var logs testenv.LogBuffer
	g := startA(t, s, &logs)
	// The failures are armed after the follower's first reading, at
	// its start (were it later on a loaded machine, they would fall on
	// it, tried again all the same).
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	left = 2
	mu.Unlock()
	ll := netip.MustParseAddr("fe80::99")
	if out, err := s.GwA.Run("ip", "-6", "address", "add", ll.String()+"/64", "dev", s.LANA, "nodad"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !testenv.PollUntil(5*time.Second, func() bool { return g.lanDev.ICMPLinkLocal() == ll }) {
		t.Errorf("the LAN device's link-local source is %v 5 s after %v was added, its re-reads failing twice; want it", g.lanDev.ICMPLinkLocal(), ll)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != 2 {
		t.Errorf("%d re-reads of %s failed, want the 2 armed", failed, s.LANA)
	}
	if !strings.Contains(logs.String(), "trying again") {
		t.Errorf("the failed re-reads not logged:\n%s", logs.String())
	}
}
