//go:build linux

package compatgw

import (
	"os/exec"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestHostUnreachable: in compat mode too, a LAN host that pings a removed
// peer's networks (kept in the LAN's XDP filter, dropped by the
// PortDevice as no_route) gets what Linux's wg0 answers: ICMP host
// unreachable / ICMPv6 address unreachable from the gateway's LAN address,
// at once, as many as Linux's default rate limits let through: 6 of 20
// pings sent at once (XRLIM_BURST_FACTOR).
func TestHostUnreachable(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	wgBin := testenv.Tool(t, "wg", "wireguard-tools")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "cu")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc, f := s.FastConfig, compatFile(s)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, ICMPDestInterval: time.Hour}) // the burst alone: no refill while the machine holds a reader up
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
	if out, err := exec.Command(wgBin, "set", s.GwName, "peer", fc.Peers[0].PublicKey.String(), "remove").CombinedOutput(); err != nil {
		t.Fatalf("wg set: %v\n%s", err, out)
	}
	for _, c := range []struct{ dst, from string }{
		{twosite.HostB4.String(), twosite.LANA4.String()},
		{twosite.HostB6.String(), "2001:db8:1::1"},
	} {
		before := g.Stats().LAN
		if got := testenv.Unreachables(t, s.HostA, c.dst, c.from, 20); got != 6 {
			t.Errorf("20 pings to %s: %d host unreachable, want 6 (Linux's burst)", c.dst, got)
		}
		// ping gives up a second after its last echo request: on a busy
		// machine the PortDevice may not have read the last ones yet, and
		// it counts an answer after sending it.
		st := g.Stats().LAN
		testenv.PollUntil(5*time.Second, func() bool {
			st = g.Stats().LAN
			return st.Drops[tundev.PortDropNoRoute]-before.Drops[tundev.PortDropNoRoute] >= 20 &&
				st.ICMPErrors+st.ICMPSuppressed-before.ICMPErrors-before.ICMPSuppressed >= 20
		})
		if d := st.Drops[tundev.PortDropNoRoute] - before.Drops[tundev.PortDropNoRoute]; d != 20 || st.ICMPErrors-before.ICMPErrors != 6 || st.ICMPSuppressed-before.ICMPSuppressed != 14 {
			t.Errorf("%s: no_route %d, icmp_errors %d, icmp_suppressed %d; want 20 6 14", c.dst, d, st.ICMPErrors-before.ICMPErrors, st.ICMPSuppressed-before.ICMPSuppressed)
		}
	}
}
