//go:build linux

package fastgw_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestWANMTULoweredFragmented: the WAN's MTU lowered under a running
// gateway (ip link set dev WAN mtu 1300) bounds its outer packets: host
// A's 1400-byte pings with DF, 1460-byte tunnel packets, leave as IP
// fragments of at most 1300 bytes (outer_fragmented; nothing too long at
// the WAN port), which the peer's kernel reassembles, and are answered
// (the peer, stock wireguard-go, has its kernel fragment its replies), as
// through a Linux wg0, whose kernel fragments what WireGuard sends.
// Before, they were dropped and counted as the port's too_long (and
// before that sent whole in frames the link does not carry). The MTU
// raised again sends them whole. With IPv6 endpoints, at IPv6's least
// MTU (1280), the 1480-byte outer packets leave with Fragment headers
// (RFC 8200 §4.5) that the peer's kernel reassembles as well.
func TestWANMTULoweredFragmented(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		cfg          twosite.Config
		low          int
	}{
		{"outer-ipv4", "wml", twosite.Config{}, 1300},
		{"outer-ipv6", "wml6", twosite.Config{Outer6: true}, 1280},
	} {
		t.Run(tc.name, func(t *testing.T) { testWANMTULoweredFragmented(t, tc.prefix, tc.cfg, tc.low) })
	}
}

func testWANMTULoweredFragmented(t *testing.T, prefix string, cfg twosite.Config, low int) {
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Short(t, "builds namespaces and runs two gateways")
	s, g, logs := startLoggedWith(t, prefix, cfg)
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan, _ := g.Ports()
	mtu := func(want int) {
		t.Helper()
		// Both ends: a link has one MTU (a veth drops what its
		// receiving end's MTU does not take).
		runOK(t, s.GwA, "ip", "link", "set", "dev", s.WANA, "mtu", strconv.Itoa(want))
		runOK(t, s.GwB, "ip", "link", "set", "dev", s.WANB, "mtu", strconv.Itoa(want))
		// The change is logged once followed (netlink); a minute bounds
		// only its never coming.
		if !testenv.PollUntil(time.Minute, func() bool {
			return strings.Contains(logs.String(), "WAN MTU changed") && strings.Contains(logs.String(), "mtu="+strconv.Itoa(want)+" ")
		}) {
			t.Fatalf("WAN MTU set to %d: no change logged\n%s", want, logs.String())
		}
	}
	fragmented := func() (n uint64) {
		for _, q := range g.Engine().Stats() {
			n += q.OuterFragmented
		}
		return n
	}
	tooLong := func() uint64 { st := wan.Stats(); return st.Drops[dataplane.DropTooLong] }
	mtu(low)
	if !strings.Contains(logs.String(), "leave as IP fragments") {
		t.Errorf("the lowered WAN MTU's warning does not say the packets leave as fragments:\n%s", logs.String())
	}
	before, long := fragmented(), tooLong()
	const n = 3
	out, err := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String())
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("%d pings of 1400 bytes with DF over a WAN of MTU %d: %v\n%s\nstats %+v\nwan %+v", n, low, err, out, g.Engine().Stats(), wan.Stats())
		o, _ := s.GwB.Run("nstat", "-as")
		t.Log(o)
	}
	if got := fragmented() - before; got != n {
		t.Errorf("outer_fragmented %d more for %d pings over a WAN of MTU %d, want %d", got, n, low, n)
	}
	if got := tooLong() - long; got != 0 {
		t.Errorf("%d frames too long for the WAN port, want 0", got)
	}
	mtu(1500)
	before = fragmented()
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String()); err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("a 1400-byte ping with DF after the WAN MTU went back to 1500: %v\n%s", err, out)
	}
	if got := fragmented() - before; got != 0 {
		t.Errorf("outer_fragmented %d more at a WAN MTU of 1500, want 0", got)
	}
}
