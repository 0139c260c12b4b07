//go:build linux

package fastgw_test

import (
	"strings"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestSmallTunnelMTUOuterIPv6: a fast-path gateway with IPv6 endpoints
// starts at a tunnel MTU of 1200 and carries IPv4 between the sites, as a
// Linux wg0 of that MTU does (the outer packets, 1200 + 80 bytes at most,
// fit every IPv6 link): host A's pings of 1200 bytes with DF come back, one
// byte more is answered "fragmentation needed" with 1200, and TCP both
// ways arrives whole. IPv6 is off in such a tunnel, as on Linux's wg0
// below 1280: host A's ping6 to site B is answered "no route" and
// counted as ipv6_off (it went through, and larger packets stalled on
// "packet too big" with 1200, which hosts do not take). The start refused it ("tunnel MTU 1200 below the
// minimum"), which left links that need a small tunnel MTU (PPPoE, IPv6
// endpoints, more encapsulation) without the fast path.
func TestSmallTunnelMTUOuterIPv6(t *testing.T) {
	s := newSite(t, twosite.Config{Outer6: true, NoFastPath: true})
	fc := s.FastConfig
	fc.MTU = 1200
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatalf("start at tunnel MTU 1200 with IPv6 endpoints: %v", err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostA, twosite.HostB4.String(), 1200-28)
	out, err := s.HostA.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1173", twosite.HostB4.String())
	if err == nil || !strings.Contains(out, "mtu = 1200") {
		t.Errorf("ping of 1201 bytes with DF: %v, %q; want fragmentation needed with mtu = 1200", err, out)
	}
	tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 2<<20)
	tcpTransfer(t, s.HostB, s.HostA, twosite.HostA4, 2<<20)
	before := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropIPv6Off]
	out, err = s.HostA.Run("ping", "-6", "-c", "1", "-W", "1", twosite.HostB6.String())
	if err == nil || !strings.Contains(out, "No route") {
		t.Errorf("ping6 through a tunnel of MTU 1200: %v, %q; want destination unreachable, no route", err, out)
	}
	if n := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropIPv6Off] - before; n != 1 {
		t.Errorf("ipv6_off drops %d, want 1; drops %s", n, dropsString(s.Gateway))
	}
	dump := wgShow(t, s.GwName)
	if !strings.Contains(dump, "[2001:db8:") {
		t.Errorf("wg show %s: the peer's endpoint is not IPv6:\n%s", s.GwName, dump)
	}
	t.Logf("wgpio drops: %s", dropsString(s.Gateway))
}
