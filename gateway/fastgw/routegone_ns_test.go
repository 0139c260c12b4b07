//go:build linux

package fastgw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/twosite"
)

// TestEndpointBlackholed: a blackhole route added for a peer's endpoint
// while its session runs stops what the gateway sends to it, as Linux's
// route lookup on every send stops wg0's, and the tunnel works again once
// the route is deleted. Before, the gateway kept the next hop's MAC of
// before for as long as the session and its rekeys lasted: a helper's
// blackholed endpoint answered every ping for 4 minutes.
func TestEndpointBlackholed(t *testing.T) {
	s := newSite(t, twosite.Config{Routed: true})
	logOnFailure(t, s.Gateway)
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	if out, err := s.GwA.Run("ip", "route", "add", "blackhole", "198.18.2.2/32"); err != nil {
		t.Fatalf("ip route add blackhole: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // the route followed, a tick or two
	out, _ := s.HostA.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", twosite.HostB4.String())
	if !strings.Contains(out, " 0 received") {
		t.Errorf("pings through a blackholed endpoint answered:\n%s", out)
	}
	if out, err := s.GwA.Run("ip", "route", "del", "blackhole", "198.18.2.2/32"); err != nil {
		t.Fatalf("ip route del blackhole: %v\n%s", err, out)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}
