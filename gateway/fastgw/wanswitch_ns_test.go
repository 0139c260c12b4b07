//go:build linux

package fastgw_test

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestWANAddressSwitch: a stock wireguard-go road warrior whose Endpoint
// is switched between the gateway's two WAN addresses in a live session
// (wg set ... endpoint), 25 times, is answered from the address it
// switched to from its first packet there on, as Linux's WireGuard sets
// an endpoint's source from every authenticated packet: the worker
// moves the endpoint's source at once (fastpath: localMoved). Answered
// from the previous address until the next publish (50 ms, as before
// December 2026), the road warrior, which follows the source of what it
// authenticates, went back there (6 of 25 switches). Every packet the
// gateway sends it after its first to the new address (captured at the
// road warrior) must come from that address, and the road warrior's
// endpoint must stay there.
func TestWANAddressSwitch(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	testenv.Tool(t, "ping", "iputils-ping")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	const primary, second, rwOuter = "198.18.1.1", "198.18.1.100", "198.18.1.2"
	tp := testenv.Topology(t, "wx")
	ns := func(role string) *topo.NS { return testenv.NS(t, tp, role) }
	gw, rw, hl := ns("gw"), ns("rw"), ns("hl")
	wan, lan := testenv.Veth(t, tp, gw, rw), testenv.Veth(t, tp, gw, hl)
	for _, err := range []error{
		gw.AddAddr(wan.A, primary+"/24"),
		gw.AddAddr(wan.A, second+"/24"),
		rw.AddAddr(wan.B, rwOuter+"/24"),
		gw.AddAddr(lan.A, "198.19.1.1/24"),
		hl.AddAddr(lan.B, "198.19.1.10/24"),
		hl.AddRoute("default", "198.19.1.1", ""),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	gwKey, rwKey := newKey(t), newKey(t)
	rwInner := netip.MustParsePrefix("198.19.101.2/32")
	var g *fastgw.Gateway
	if err := gw.Do(func() (err error) {
		g, err = fastgw.Start(fastgw.Config{
			Name: topo.UniqueName("wgwx"), PrivateKey: gwKey, ListenPort: 51820,
			WAN: wan.A, LAN: lan.A, Queues: 1,
			Peers: []gateway.PeerConfig{{PublicKey: rwKey.PublicKey(), AllowedIPs: []netip.Prefix{rwInner}}},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	capt := testenv.StartCapture(t, tcpdump, rw, wan.B, t.TempDir()+"/wan.pcap", "udp and port 51820")
	port := func(a string) string { return a + ":51820" }
	rwDev, err := wgpeer.Start(rw, wgpeer.Config{
		Name: topo.UniqueName("wgrw"), PrivateKey: rwKey, ListenPort: 51820, Address: rwInner,
		Routes: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: gwKey.PublicKey(), Endpoint: netip.MustParseAddrPort(port(primary)),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rwDev.Close)
	ping(t, rw, "198.19.1.10", 0)

	gwPub := gwKey.PublicKey()
	const switches = 25
	to := primary
	for i := range switches {
		if to == primary {
			to = second
		} else {
			to = primary
		}
		set := fmt.Sprintf("public_key=%s\nendpoint=%s\n", hex.EncodeToString(gwPub[:]), port(to))
		if err := rwDev.Dev.IpcSet(set); err != nil {
			t.Fatal(err)
		}
		if out, err := rw.Run("ping", "-c", "3", "-i", "0.05", "-W", "1", "198.19.1.10"); err != nil {
			t.Fatalf("switch %d to %s: ping: %v\n%s", i, to, err, out)
		}
		if ep := stockEndpoint(t, rwDev); ep != port(to) {
			t.Errorf("switch %d: road warrior's endpoint = %s after pinging, want %s (answered from the previous address)", i, ep, port(to))
		}
	}

	// In capture order: after the road warrior's first packet to an
	// address, until its first to the other, every packet to it comes
	// from that address.
	testenv.PollUntil(5*time.Second, func() bool {
		out, _ := rw.Run(tcpdump, "-n", "-r", capt.File())
		return strings.Count(out, " "+rwOuter+".51820 > ") >= 3*switches
	})
	toGw, fromGw, wrong, cur := 0, 0, 0, ""
	for _, l := range capt.Lines(t) {
		for _, a := range []string{primary, second} {
			switch {
			case strings.Contains(l, " "+rwOuter+".51820 > "+a+".51820:"):
				toGw++
				cur = a
			case strings.Contains(l, " "+a+".51820 > "+rwOuter+".51820:"):
				fromGw++
				if cur != "" && a != cur {
					wrong++
					t.Errorf("sent from %s after the road warrior switched to %s: %s", a, cur, l)
				}
			}
		}
	}
	if toGw < 3*switches || fromGw < 3*switches {
		t.Errorf("captured %d packets to the gateway and %d from it, want %d or more each", toGw, fromGw, 3*switches)
	}
	t.Logf("%d packets to the gateway, %d from it, %d from the previous address", toGw, fromGw, wrong)
}
