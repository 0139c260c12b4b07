//go:build linux

package compatgw

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestWANMTUFollowed: the WAN's MTU lowered under a running compat
// gateway (ip link set dev WAN mtu 1300) is logged with the numbers, as
// in fast-path mode, and bounds what the bind sends: host A's 1400-byte
// pings with DF, 1460-byte tunnel packets, are dropped and counted as
// the bind's too_big. Before, compat mode logged nothing and sent them
// whole, counted as transmitted, in frames the link does not carry. The
// WAN link set down and up is logged both ways, as the LAN's is, and the
// MTU raised again lets the pings through.
func TestWANMTUFollowed(t *testing.T) {
	s, g, logs := loggedSite(t, "cwm", nil)
	ip := func(args ...string) {
		t.Helper()
		if out, err := s.GwA.Run("ip", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// logged waits for a line holding every one of parts (netlink
	// brings the change; a minute bounds only its never coming).
	logged := func(parts ...string) {
		t.Helper()
		if !testenv.PollUntil(time.Minute, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(l, p)
				}
				if all {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no line with %q logged:\n%s", parts, logs.String())
		}
	}
	ip("link", "set", "dev", s.WANA, "mtu", "1300")
	logged("WAN MTU changed: tunnel packets are lost", "mtu=1300 ", "too_big")
	tooBig := func() uint64 { return g.Stats().Bind.Drops[bind.DropTooBig] }
	before := tooBig()
	const n = 3
	out, _ := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "1", "-M", "do", "-s", "1372", twosite.HostB4.String())
	// wireguard-go may hand the bind the last after ping gave up on its
	// reply: wait for the count (a minute bounds only its never coming).
	testenv.PollUntil(time.Minute, func() bool { return tooBig()-before >= n })
	if got := tooBig() - before; got != n {
		t.Errorf("%d pings of 1400 bytes with DF over a WAN of MTU 1300: bind too_big %d, want %d (bind %+v)\n%s", n, got, n, g.Stats().Bind, out)
	}
	ip("link", "set", "dev", s.WANA, "down")
	logged("WAN link down", "no_wan_route")
	ip("link", "set", "dev", s.WANA, "up", "mtu", "1500")
	logged("WAN link up again")
	logged("WAN MTU changed; the tunnel MTU fits", "mtu=1500 ")
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String()); err != nil {
		t.Errorf("a 1400-byte ping with DF after the WAN MTU went back to 1500: %v\n%s", err, out)
	}
}
