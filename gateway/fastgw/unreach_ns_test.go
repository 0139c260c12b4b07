package fastgw_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestHostUnreachableNS: a LAN host that pings a removed peer's prefix, or
// the allowed IPs of a peer without an endpoint (a road warrior not heard
// from), gets what Linux's wg0 answers (wg_xmit: -ENOKEY, -EDESTADDRREQ):
// ICMP host unreachable / ICMPv6 address unreachable from the gateway's LAN
// address, at once, as many as Linux's default rate limits let through:
// of 20 pings 10 ms apart, 6 (XRLIM_BURST_FACTOR), then after a second
// one more for IPv4 (icmp_ratelimit 1000 ms), four for IPv6 (1000 ms >> 2
// for a destination behind a /64 route, icmpv6_xrlim_allow). The drops are
// counted by reason (no_route, no_endpoint).
func TestHostUnreachableNS(t *testing.T) {
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	key := s.FastConfig.Peers[0].PublicKey.String()
	roamer := "fPmNcx0FIvqkJcNMDAsQhrNKbzHPCGCcqcjmS3Sg7nY=" // never heard from: no endpoint
	wgCmd(t, "set", s.GwName, "peer", roamer, "allowed-ips", "198.19.50.0/24,2001:db8:50::/64")
	wgCmd(t, "set", s.GwName, "peer", key, "remove")
	for _, c := range []struct {
		name, dst, from string
		later           [2]int // answers to the second burst, at least and at most
		why             fastpath.DropReason
	}{
		{"removed peer IPv4", twosite.HostB4.String(), twosite.LANA4.String(), [2]int{1, 1}, fastpath.DropNoRoute},
		{"removed peer IPv6", twosite.HostB6.String(), "2001:db8:1::1", [2]int{4, 5}, fastpath.DropNoRoute},
		{"no endpoint IPv4", "198.19.50.10", twosite.LANA4.String(), [2]int{1, 1}, fastpath.DropNoEndpoint},
		{"no endpoint IPv6", "2001:db8:50::10", "2001:db8:1::1", [2]int{4, 5}, fastpath.DropNoEndpoint},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fastpath.TotalDrops(s.Gateway.Engine().Stats())[c.why]
			if got := unreachables(t, s.HostA, c.dst, c.from, 20); got != 6 {
				t.Errorf("20 pings to %s: %d host unreachable, want 6 (Linux's burst)", c.dst, got)
			}
			time.Sleep(time.Second)
			if got := unreachables(t, s.HostA, c.dst, c.from, 5); got < c.later[0] || got > c.later[1] {
				t.Errorf("5 pings to %s a second later: %d host unreachable, want %d-%d", c.dst, got, c.later[0], c.later[1])
			}
			if got := fastpath.TotalDrops(s.Gateway.Engine().Stats())[c.why] - before; got != 25 {
				t.Errorf("%s drops %d, want 25; drops %s", c.why, got, dropsString(s.Gateway))
			}
		})
		time.Sleep(2 * time.Second) // the next case's budget full again
	}
}

// unreachables pings dst n times from ns, 10 ms apart, and returns how
// many "destination unreachable" answers came from from.
func unreachables(t *testing.T, ns *topo.NS, dst, from string, n int) int {
	t.Helper()
	out, _ := ns.Run("ping", "-n", "-c", fmt.Sprint(n), "-i", "0.01", "-W", "1", dst) // fails: no echo reply
	got := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(l), "unreachable") {
			if !strings.HasPrefix(l, "From "+from+" ") {
				t.Errorf("answer %q, want one from %s", l, from)
			}
			got++
		}
	}
	return got
}
