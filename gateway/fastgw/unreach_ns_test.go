//go:build linux

package fastgw_test

import (
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestHostUnreachableNS: a LAN host that pings a removed peer's prefix, or
// the allowed IPs of a peer without an endpoint (a road warrior not heard
// from), gets what Linux's wg0 answers (wg_xmit: -ENOKEY, -EDESTADDRREQ):
// ICMP host unreachable / ICMPv6 address unreachable from the gateway's LAN
// address, at once, as many as Linux's default rate limits let through:
// of 20 pings sent at once, 6 (XRLIM_BURST_FACTOR), then, Δ later, one more
// per second for IPv4 (icmp_ratelimit 1000 ms) and per 250 ms for IPv6
// (1000 ms >> 2 for a destination behind a /64 route,
// icmpv6_xrlim_allow). The drops are counted by reason (no_route,
// no_endpoint). The removed peer's prefixes keep their routes into the
// exception TUN: the host's kernel forwards them there, and the gateway
// answers them on the LAN.
func TestHostUnreachableNS(t *testing.T) {
	s := newSite(t, twosite.Config{})
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	// The gateway's kernel knows hostA's IPv6 neighbour entry, as a
	// router that talks with its LAN hosts does (an error to a LAN host
	// whose MAC is being resolved waits for none: icmpKernel).
	ping(t, s.HostA, "2001:db8:1::1", 0)
	key := s.FastConfig.Peers[0].PublicKey.String()
	roamer := "fPmNcx0FIvqkJcNMDAsQhrNKbzHPCGCcqcjmS3Sg7nY=" // never heard from: no endpoint
	wgCmd(t, "set", s.GwName, "peer", roamer, "allowed-ips", "198.19.50.0/24,2001:db8:50::/64")
	wgCmd(t, "set", s.GwName, "peer", key, "remove")
	for _, c := range []struct {
		name, dst, from string
		interval        time.Duration // Linux's per-destination interval
		why             fastpath.DropReason
	}{
		{"removed peer IPv4", twosite.HostB4.String(), twosite.LANA4.String(), time.Second, fastpath.DropNoRoute},
		{"removed peer IPv6", twosite.HostB6.String(), "2001:db8:1::1", time.Second / 4, fastpath.DropNoRoute},
		{"no endpoint IPv4", "198.19.50.10", twosite.LANA4.String(), time.Second, fastpath.DropNoEndpoint},
		{"no endpoint IPv6", "2001:db8:50::10", "2001:db8:1::1", time.Second / 4, fastpath.DropNoEndpoint},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fastpath.TotalDrops(s.Gateway.Engine().Stats())[c.why]
			start := time.Now()
			if got := testenv.Unreachables(t, s.HostA, c.dst, c.from, 20); got != 6 {
				t.Errorf("20 pings to %s: %d host unreachable, want 6 (Linux's burst)", c.dst, got)
			}
			// One more per interval since the burst; ping's own
			// timing (the second run starts Δ later) allows one
			// either way.
			d := time.Since(start)
			want := min(int(d/c.interval), 5)
			if got := testenv.Unreachables(t, s.HostA, c.dst, c.from, 5); got < want-1 || got > want+1 {
				t.Errorf("5 pings to %s %v later: %d host unreachable, want %d±1", c.dst, d, got, want)
			}
			// A worker counts a burst's drops after answering them:
			// ping, answered its last, may be done before the count.
			drops := func() uint64 { return fastpath.TotalDrops(s.Gateway.Engine().Stats())[c.why] - before }
			testenv.PollUntil(5*time.Second, func() bool { return drops() >= 25 })
			if got := drops(); got != 25 {
				t.Errorf("%s drops %d, want 25; drops %s", c.why, got, dropsString(s.Gateway))
			}
		})
		time.Sleep(2 * time.Second) // the next case's budget full again
	}
}
