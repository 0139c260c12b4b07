//go:build linux

package compatgw

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestIPv6OffBelow1280: a compat-mode gateway at a tunnel MTU of 1200,
// with IPv6 endpoints, carries IPv4 (1200-byte pings with DF) and no IPv6,
// as Linux's wg0 of that MTU: host A's ping6 to site B is answered "no
// route" from the LAN address and counted as the LAN side's ipv6_off.
// Before, it went through, and larger IPv6 packets got "packet too big"
// with 1200, which hosts do not take (RFC 8201 §4), and stalled.
func TestIPv6OffBelow1280(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tp := testenv.Topology(t, "c6")
	s, err := twosite.Build(tp, twosite.Config{Outer6: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc, f := s.FastConfig, compatFile(s)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			MTU: 1200, SyncInterval: 50 * time.Millisecond})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1172", twosite.HostB4.String()); err != nil {
		t.Errorf("ping of 1200 bytes with DF: %v\n%s", err, out)
	}
	before := g.Stats().LAN.Drops[tundev.PortDropIPv6Off]
	out, err := s.HostA.Run("ping", "-6", "-c", "1", "-W", "1", twosite.HostB6.String())
	if err == nil || !strings.Contains(out, "No route") {
		t.Errorf("ping6 through a tunnel of MTU 1200: %v, %q; want destination unreachable, no route", err, out)
	}
	var n uint64
	testenv.PollUntil(5*time.Second, func() bool {
		n = g.Stats().LAN.Drops[tundev.PortDropIPv6Off] - before
		return n >= 1
	})
	if n != 1 {
		t.Errorf("ipv6_off drops %d, want 1; LAN drops %v", n, g.Stats().LAN.Drops.List())
	}
}
