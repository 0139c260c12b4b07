//go:build linux

package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// TestWANSourceNotHeardFrom: what the gateway sends to a peer it has not
// heard from (its handshake initiations toward the configured Endpoint)
// leaves from the source the kernel's route toward the endpoint chooses,
// as Linux's WireGuard sends from its route lookup's source, and follows
// the route when it changes:
//
//	rw (stock wireguard-go, not started at first) ── gw (wgpio) ── hl
//
// The WAN has its primary address, then a second one added after it (a
// keepalived virtual address; IPv6: with preferred_lft 0, deprecated, as
// keepalived users set it, which RFC 6724 §5 rule 3 passes over though
// the kernel lists it first), and a route toward the endpoint with `src`
// the second address before the gateway starts: the very first
// initiation leaves from it, none from the primary (the default, which
// configuring the endpoint gives it until the route is asked, before the
// first initiation leaves: gateway/routesrc.go). The route's src
// removed: from the primary. Added again: from the second. Removed: from
// the primary. Then the road warrior starts and answers, and its
// endpoint for the gateway (which follows what it authenticates) is the
// primary. With IPv4 and IPv6 outer addresses; captured at the road
// warrior.
func TestWANSourceNotHeardFrom(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	for _, c := range []struct {
		name                      string
		primary, second, rw, bits string
		secondOpts                []string // ip addr add options of the second address
	}{
		{"ipv4", "198.18.1.1", "198.18.1.100", "198.18.1.2", "32", nil},
		{"ipv6", "2001:2:f1::1", "2001:2:f1::100", "2001:2:f1::2", "128", []string{"preferred_lft", "0", "nodad"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plen := "/24"
			if strings.Contains(c.primary, ":") {
				plen = "/64"
			}
			tp := testenv.Topology(t, "ws")
			ns := func(role string) *topo.NS { return testenv.NS(t, tp, role) }
			gw, rw, hl := ns("gw"), ns("rw"), ns("hl")
			wan, lan := testenv.Veth(t, tp, gw, rw), testenv.Veth(t, tp, gw, hl)
			run := func(n *topo.NS, args ...string) {
				t.Helper()
				if out, err := n.Run("ip", args...); err != nil {
					t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
				}
			}
			for _, err := range []error{
				gw.AddAddr(wan.A, c.primary+plen),
				rw.AddAddr(wan.B, c.rw+plen),
				gw.AddAddr(lan.A, "198.19.1.1/24"),
				hl.AddAddr(lan.B, "198.19.1.10/24"),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			run(gw, append([]string{"addr", "add", c.second + plen, "dev", wan.A}, c.secondOpts...)...)
			run(gw, "route", "add", c.rw+"/"+c.bits, "dev", wan.A, "src", c.second)

			gwKey, rwKey := newKey(t), newKey(t)
			rwInner := netip.MustParsePrefix("198.19.101.2/32")
			capt := testenv.StartCapture(t, tcpdump, rw, wan.B, t.TempDir()+"/wan.pcap", "udp and dst port 51820")
			var g *fastgw.Gateway
			if err := gw.Do(func() (err error) {
				g, err = fastgw.Start(fastgw.Config{
					Name: topo.UniqueName("wgws"), PrivateKey: gwKey, ListenPort: 51820,
					WAN: wan.A, LAN: lan.A, Queues: 1,
					Peers: []gateway.PeerConfig{{
						PublicKey: rwKey.PublicKey(), Endpoint: netip.AddrPortFrom(netip.MustParseAddr(c.rw), 51820),
						AllowedIPs: []netip.Prefix{rwInner}, PersistentKeepalive: time.Second,
					}},
				})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })

			// initiations counts the handshake initiations (148 bytes)
			// captured from src so far.
			initiations := func(src string) int {
				out, _ := rw.Run(tcpdump, "-n", "-r", capt.File())
				n := 0
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, " "+src+".51820 > "+c.rw+".51820:") && strings.HasSuffix(l, "length 148") {
						n++
					}
				}
				return n
			}
			// One at start, then one every Rekey-Timeout (5 s, whitepaper
			// §6.4) and jitter.
			const retry = 12 * time.Second
			wait := func(src string, after int, what string) {
				t.Helper()
				if !testenv.PollUntil(retry, func() bool { return initiations(src) > after }) {
					t.Fatalf("%s: no handshake initiation from %s within %v (%d from %s, %d from %s)", what, src, retry,
						initiations(c.primary), c.primary, initiations(c.second), c.second)
				}
			}
			wait(c.second, 0, "at start, a route with src "+c.second)
			if n := initiations(c.primary); n != 0 {
				t.Errorf("at start: %d initiations from the primary %s, want 0 (the route chooses %s)", n, c.primary, c.second)
			}

			run(gw, "route", "replace", c.rw+"/"+c.bits, "dev", wan.A)
			wait(c.primary, 0, "route without src")

			fromSecond := initiations(c.second)
			run(gw, "route", "replace", c.rw+"/"+c.bits, "dev", wan.A, "src", c.second)
			wait(c.second, fromSecond, "route with src "+c.second+" again")

			fromPrimary := initiations(c.primary)
			run(gw, "route", "replace", c.rw+"/"+c.bits, "dev", wan.A)
			wait(c.primary, fromPrimary, "route without src again")

			rwDev, err := wgpeer.Start(rw, wgpeer.Config{
				Name: topo.UniqueName("wgrw"), PrivateKey: rwKey, ListenPort: 51820, Address: rwInner,
				Peers: []wgpeer.Peer{{PublicKey: gwKey.PublicKey(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rwDev.Close)
			want := netip.AddrPortFrom(netip.MustParseAddr(c.primary), 51820).String()
			if !testenv.PollUntil(retry, func() bool { return stockEndpoint(t, rwDev) == want }) {
				t.Errorf("road warrior's endpoint for the gateway = %q, want %s; drops %s", stockEndpoint(t, rwDev), want, dropsString(g))
			}
		})
	}
}

func newKey(t *testing.T) noise.PrivateKey {
	t.Helper()
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
