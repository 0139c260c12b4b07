//go:build linux

package fastgw_test

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestExceptionTUNDownAndUp: with the exception TUN down (ip link set wg0
// down), the kernel refuses what the gateway hands it for the host; those
// packets are counted (ExceptionDrops). Brought up again, the interface
// gets back what the kernel removed with it, the routes of the allowed
// IPs into it and the IPv6 tunnel address, and the host answers again.
// Allowed IPs changed while it is down (a reload, wg set) are no warning
// (the kernel refuses routes into a down link, and removed the old ones):
// the new prefix's route is there once it is up.
func TestExceptionTUNDownAndUp(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	testenv.Tool(t, "ping", "iputils-ping")
	fc := s.FastConfig
	fc.Addresses = append(fc.Addresses, netip.MustParsePrefix("fd00:5::1/64"))
	var logs testenv.LogBuffer
	fc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	if n := s.Gateway.ExceptionDrops(); n != 0 {
		t.Fatalf("ExceptionDrops = %d with the interface up, want 0", n)
	}
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	for range 3 {
		if out, err := s.HostB.Run("ping", "-c", "1", "-W", "1", twosite.TunnelA.String()); err == nil {
			t.Fatalf("ping answered with the exception TUN down:\n%s", out)
		}
	}
	// ping gives up after a second, which does not wait for the worker.
	if !testenv.PollUntil(20*time.Second, func() bool { return s.Gateway.ExceptionDrops() >= 3 }) {
		n := s.Gateway.ExceptionDrops()
		t.Errorf("ExceptionDrops = %d after 3 pings to a down exception TUN, want >= 3", n)
	}
	// Keep the prefixes the pings need, drop the IPv6 one, add 198.19.3.0/24.
	set := fmt.Sprintf("public_key=%s\nreplace_allowed_ips=true\nallowed_ip=198.19.2.0/24\nallowed_ip=198.19.100.2/32\nallowed_ip=198.19.3.0/24\n",
		fc.Peers[0].PublicKey.Hex())
	if err := s.Gateway.Device().IpcSet(strings.NewReader(set)); err != nil {
		t.Fatalf("IpcSet with the exception TUN down: %v", err)
	}
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	waitFor(t, "the route of 198.19.3.0/24, added while down, into "+s.GwName, func() bool {
		out, _ := s.GwA.Run("ip", "route", "show", "198.19.3.0/24")
		return strings.Contains(out, "dev "+s.GwName)
	})
	if l := logs.String(); strings.Contains(l, "level=WARN msg=\"route into the exception TUN") {
		t.Errorf("allowed IPs changed while the exception TUN was down logged a route warning:\n%s", l)
	}
	// The kernel removed the IPv6 address with the link going down.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, _ := s.GwA.Run("ip", "-6", "addr", "show", "dev", s.GwName)
		if strings.Contains(out, "fd00:5::1/64") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the IPv6 tunnel address is not back on %s:\n%s", s.GwName, out)
		}
	}
}

// TestExceptionTUNMTUChanged: ip link set wg0 mtu N, which on Linux
// lowers the MTU of what wg0 forwards, bounds only the host's own packets
// here: the gateway warns so, naming the new MTU and the tunnel's, and a
// LAN host's packet of the tunnel MTU (DF) still crosses; set back to the
// tunnel MTU, it says so at info level. A down and up is no MTU change.
func TestExceptionTUNMTUChanged(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	s, _, logs := startLogged(t, "fg")
	mtu := cmp.Or(s.FastConfig.MTU, fastpath.DefaultMTU)
	full := mtu - 28 // ping's payload in an IPv4 packet of the tunnel MTU
	ping(t, s.HostA, twosite.HostB4.String(), full)
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	low := mtu - 100
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "mtu", fmt.Sprint(low))
	warn := fmt.Sprintf("mtu=%d tunnel_mtu=%d", low, mtu)
	waitFor(t, "the warning of the exception TUN's MTU changed", func() bool {
		l := logs.String()
		return strings.Contains(l, `level=WARN msg="exception TUN MTU changed`) && strings.Contains(l, warn)
	})
	ping(t, s.HostA, twosite.HostB4.String(), full)
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "mtu", fmt.Sprint(mtu))
	waitFor(t, "the info line of the exception TUN's MTU back", func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf(`level=INFO msg="exception TUN MTU is the tunnel MTU again" interface=%s mtu=%d`, s.GwName, mtu))
	})
	if n := strings.Count(logs.String(), `msg="exception TUN MTU`); n != 2 {
		t.Errorf("%d log lines of the exception TUN's MTU, want 2 (the down and up is none):\n%s", n, logs.String())
	}
}

// TestExceptionTUNFlaps: the exception TUN brought down and up again fast,
// many times, its MTU changed meanwhile, and a peer's allowed IP added
// while it is down (its route refused then): when it stays up, its routes
// (the added prefix's included) and its IPv6 tunnel address are back, and
// the host answers through it.
func TestExceptionTUNFlaps(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	testenv.Tool(t, "ping", "iputils-ping")
	fc := s.FastConfig
	fc.Addresses = append(fc.Addresses, netip.MustParsePrefix("fd00:5::1/64"))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "link set %s down\nlink set %s mtu %d\nlink set %s up\n", s.GwName, s.GwName, 1380+i%20, s.GwName)
	}
	fmt.Fprintf(&b, "link set %s down\n", s.GwName)
	batch := filepath.Join(t.TempDir(), "flaps")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, s.GwA, "ip", "-batch", batch)
	peer := fc.Peers[0].PublicKey.Hex()
	if err := s.Gateway.Device().IpcSet(strings.NewReader("public_key=" + peer + "\nallowed_ip=198.19.77.0/24\n")); err != nil {
		t.Fatal(err)
	}
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out6, _ := s.GwA.Run("ip", "-6", "addr", "show", "dev", s.GwName)
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		if strings.Contains(out6, "fd00:5::1/64") && strings.Contains(routes, "198.19.77.0/24") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the flaps, %s lacks its IPv6 tunnel address or the added prefix's route:\n%s\n%s", s.GwName, out6, routes)
		}
	}
}

// TestExceptionTUNDeleted: the exception TUN deleted while the gateway
// runs (ip link del wg0): what the workers hand it for the host is
// counted as refused, the tunnel's transit traffic goes on, and Close
// returns.
func TestExceptionTUNDeleted(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	testenv.Tool(t, "ping", "iputils-ping")
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(s.FastConfig)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	runOK(t, s.GwA, "ip", "link", "del", s.GwName)
	for range 3 {
		s.HostB.Run("ping", "-c", "1", "-W", "1", twosite.TunnelA.String())
	}
	// ping gives up after a second, which does not wait for the worker.
	if !testenv.PollUntil(20*time.Second, func() bool { return s.Gateway.ExceptionDrops() >= 3 }) {
		n := s.Gateway.ExceptionDrops()
		t.Errorf("ExceptionDrops = %d after 3 pings to a deleted exception TUN, want >= 3", n)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	closed := make(chan error, 1)
	go func() { closed <- s.Gateway.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s with the exception TUN deleted")
	}
}

// TestExceptionTUNDownAndUpUnfollowed: the exception TUN goes down and
// comes back up while its link subscription is gone (it overflowed:
// ENOBUFS), so that no update tells the watcher of either. When it
// subscribes again it finds the link up, as it left it, and restores what
// the kernel removed meanwhile: the routes of the allowed IPs into it and
// its IPv6 tunnel address. Before, it restored only on a transition from
// down to up that it saw, and both stayed lost.
func TestExceptionTUNDownAndUpUnfollowed(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	pause, resume, _, restore := fastgw.PauseLinkSubscriptions()
	t.Cleanup(restore) // after the site's Close, registered later
	s := newSite(t, twosite.Config{NoFastPath: true})
	fc := s.FastConfig
	fc.Addresses = append(fc.Addresses, netip.MustParsePrefix("fd00:5::1/64"))
	var logs testenv.LogBuffer
	fc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostB, twosite.TunnelA.String(), 0)
	pause()
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	if out := runOK(t, s.GwA, "ip", "route", "show", "dev", s.GwName); strings.Contains(out, "198.19.2.0/24") {
		t.Fatalf("the route of 198.19.2.0/24 into %s survived the down and up; the test shows nothing:\n%s", s.GwName, out)
	}
	resume()
	waitFor(t, "the IPv6 tunnel address and the route of 198.19.2.0/24 back on "+s.GwName, func() bool {
		out6, _ := s.GwA.Run("ip", "-6", "addr", "show", "dev", s.GwName)
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		return strings.Contains(out6, "fd00:5::1/64") && strings.Contains(routes, "198.19.2.0/24")
	})
	// The host's own traffic takes the tunnel again.
	ping(t, s.GwA, twosite.HostB4.String(), 0)
	if l := logs.String(); !strings.Contains(l, "went down and up while its link was not followed") {
		t.Errorf("the restore was not logged:\n%s", l)
	}
}
