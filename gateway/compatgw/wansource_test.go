//go:build linux

package compatgw

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestWANSourceOfRoute: wireguard-go on wgpio's bind sends to a
// configured endpoint it has not heard from (its handshake initiations,
// every Rekey-Timeout, 5 s, whitepaper §6.4) from the source the
// kernel's route toward it chooses, as Linux's WireGuard does, and
// follows the route. The peer is configured through the UAPI socket
// (ParseEndpoint, which asks nothing of the kernel itself) once a route
// toward it with `src` a second address (a keepalived virtual address)
// is there and the gateway has taken that address as the WAN's: the
// very first initiation leaves from that address, none from the WAN's
// first (the bind's default); the route's src removed: the first; added
// again: the second. Nothing answers (the peer's namespace runs no
// WireGuard), so the endpoint stays not heard from; captured in the
// peer's namespace.
//
// After a change the verdict is counted in initiations, not seconds:
// the bind sends one more from the source it had, as it asks the route
// anew without waiting (bind/route.go), so the new source shows at the
// second initiation after the change, up to 10.7 s on (9.2 to 10.4 s
// measured, in 20 runs beside two to four busy loops), where a deadline
// of 12 s left it to the load of the machine (see follows).
func TestWANSourceOfRoute(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n"
	})
	capt := testenv.StartCapture(t, tcpdump, s.peer, "any", t.TempDir()+"/wan.pcap", "udp and dst port 51820")
	const first, second = "198.18.0.1", "198.18.0.100"
	// initiations counts the handshake initiations (148 bytes) captured
	// so far, by source.
	initiations := func() map[string]int {
		out, _ := s.peer.Run(tcpdump, "-n", "-r", capt.File())
		n := map[string]int{}
		for _, l := range strings.Split(out, "\n") {
			for _, src := range []string{first, second} {
				if strings.Contains(l, " "+src+".51820 > 198.18.0.2.51820:") && strings.HasSuffix(l, "length 148") {
					n[src]++
				}
			}
		}
		return n
	}
	// hang bounds a wait for initiations to be captured at all (one
	// leaves every 5 to 5.33 s, Rekey-Timeout and its jitter): past it
	// they stopped. It decides nothing else.
	const hang = time.Minute
	// follows waits for an initiation from src past those counted in
	// before (initiations, taken before a change) and fails if maxStale
	// from old are captured past before first. After a change at most
	// two leave from old: one by design once the bind learned of it
	// (above), and one that left before the change's netlink
	// notification reached srcaddr.Routes, or was on its way into the
	// capture when before was counted.
	follows := func(src, old string, before map[string]int, maxStale int, what string) {
		t.Helper()
		var now map[string]int
		if !testenv.PollUntil(hang, func() bool {
			now = initiations()
			return now[src] > before[src] || now[old]-before[old] >= maxStale
		}) {
			t.Fatalf("%s: no handshake initiation within %v (%d from %s, %d from %s in all)", what, hang, now[first], first, now[second], second)
		}
		if now[src] <= before[src] {
			t.Fatalf("%s: %d handshake initiations from %s since, none from %s (%d from %s, %d from %s in all)", what,
				now[old]-before[old], old, src, now[first], first, now[second], second)
		}
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := s.gw.Run("ip", args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("addr", "add", second+"/24", "dev", s.wanDev)
	ip("route", "add", "198.18.0.2/32", "dev", s.wanDev, "src", second)
	// The bind sends from the route's source only while that is one of
	// the WAN's addresses, which the gateway follows through netlink
	// (addrs.go). Configured before it took the address, the peer's first
	// initiation left from the first: holding the follower back (s.g.wanMu
	// held from the address's addition past the UAPI set), as a loaded
	// machine may, failed the test so.
	if !testenv.PollUntil(followWait, func() bool {
		s.g.wanMu.Lock()
		defer s.g.wanMu.Unlock()
		return slices.Contains(s.g.wanAddrs, netip.MustParseAddr(second))
	}) {
		t.Fatalf("the gateway did not take %s as a WAN address within %v", second, followWait)
	}
	if got := uapiSet(t, s.name, "public_key="+strings.Repeat("22", 32), "endpoint=198.18.0.2:51820",
		"persistent_keepalive_interval=1", "allowed_ip=198.18.9.0/24"); got != "errno=0" {
		t.Fatalf("set the peer: %s", got)
	}
	follows(second, first, nil, 1, "configured, a route with src "+second)
	if n := initiations()[first]; n != 0 {
		t.Errorf("%d initiations from %s, want 0 (the route chooses %s)", n, first, second)
	}
	before := initiations()
	ip("route", "replace", "198.18.0.2/32", "dev", s.wanDev)
	follows(first, second, before, 3, "route without src")
	before = initiations()
	ip("route", "replace", "198.18.0.2/32", "dev", s.wanDev, "src", second)
	follows(second, first, before, 3, "route with src "+second+" again")
}
