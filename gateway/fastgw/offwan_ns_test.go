//go:build linux

package fastgw_test

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestEndpointOffWANLogged: a peer whose configured endpoint the host
// routes out of the LAN (a road warrior on the LAN that uses the gateway
// as its server) is never reached, as the fast path sends only out of
// the WAN: its handshake initiations are dropped as no_wan_route, and the
// log says why, once, naming the endpoint and the interface its route
// leads out of. Before, `wg set` succeeded, `wg show` looked right and
// nothing but the counter said anything.
func TestEndpointOffWANLogged(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway")
	tp := testenv.Topology(t, "ow")
	ns := func(role string) *topo.NS { return testenv.NS(t, tp, role) }
	gw, wn, hl := ns("gw"), ns("wn"), ns("hl")
	wan, lan := testenv.Veth(t, tp, gw, wn), testenv.Veth(t, tp, gw, hl)
	for _, err := range []error{
		gw.AddAddr(wan.A, "198.18.1.1/24"),
		wn.AddAddr(wan.B, "198.18.1.2/24"),
		gw.AddRoute("default", "198.18.1.2", ""),
		gw.AddAddr(lan.A, "198.19.1.1/24"),
		hl.AddAddr(lan.B, "198.19.1.10/24"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	logs := new(testenv.LogBuffer)
	peerKey := newKey(t)
	var g *fastgw.Gateway
	if err := gw.Do(func() (err error) {
		g, err = fastgw.Start(fastgw.Config{
			Name: topo.UniqueName("wgow"), PrivateKey: newKey(t), ListenPort: 51820,
			WAN: wan.A, LAN: lan.A, Queues: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Peers: []gateway.PeerConfig{{
				PublicKey: peerKey.PublicKey(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.150.0/24")},
				Endpoint: netip.MustParseAddrPort("198.19.1.10:51820"), PersistentKeepalive: time.Second,
			}},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, g, logs)
	noRoute := func() uint64 { return fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoWANRoute] }
	if !testenv.PollUntil(20*time.Second, func() bool { return noRoute() >= 2 }) {
		t.Fatalf("no_wan_route %d after 20 s, want the initiations to the LAN's endpoint counted; drops %s", noRoute(), dropsString(g))
	}
	line := `destination=198.19.1.10 route_interface=` + lan.A + ` `
	waitLogged(t, logs, line, 1)
	if n := strings.Count(logs.String(), "routes a destination of the fast path out of another interface"); n != 1 {
		t.Errorf("%d lines for the endpoint off the WAN, want 1 (once a minute):\n%s", n, logs.String())
	}
}

// closeOnCleanup closes g at the end of the test, logging g's drops
// (logOnFailure) and, if the test failed, its log (logs) before.
func closeOnCleanup(t *testing.T, g *fastgw.Gateway, logs *testenv.LogBuffer) {
	t.Cleanup(func() { g.Close() })
	logOnFailure(t, g)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway's log:\n%s", logs.String())
		}
	})
}
