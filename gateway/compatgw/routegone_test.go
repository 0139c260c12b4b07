//go:build linux

package compatgw

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestEndpointBlackholed: in compat mode, a blackhole route for a peer's
// endpoint, more specific than the WAN's default, stops what the bind
// sends to it (no_wan_route), as Linux's route lookup stops wg0's, and the
// tunnel works again once it is deleted. Before, the bind read the WAN's
// routes alone (a route without an interface was never among them), and
// the default route sent everything on through the blackhole.
func TestEndpointBlackholed(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "cb")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc, f := s.FastConfig, compatFile(s)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA, SyncInterval: 50 * time.Millisecond})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := s.GwA.Run("ip", "route", "add", "blackhole", "198.18.2.2/32"); err != nil {
		t.Fatalf("ip route add blackhole: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // the route followed
	out, _ := s.HostA.Run("ping", "-c", "3", "-i", "0.2", "-W", "1", twosite.HostB4.String())
	if !strings.Contains(out, " 0 received") {
		t.Errorf("pings through a blackholed endpoint answered:\n%s", out)
	}
	b, err := json.Marshal(g.Stats().Bind.Drops)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"no_wan_route":`) || strings.Contains(string(b), `"no_wan_route":0`) {
		t.Errorf("bind drops %s, want no_wan_route", b)
	}
	if out, err := s.GwA.Run("ip", "route", "del", "blackhole", "198.18.2.2/32"); err != nil {
		t.Fatalf("ip route del blackhole: %v\n%s", err, out)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}
