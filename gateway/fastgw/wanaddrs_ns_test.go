//go:build linux

package fastgw_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

// stockEndpoint returns the endpoint stock wireguard-go dev has for its
// only peer (UAPI get), "" when none.
func stockEndpoint(t *testing.T, dev *wgpeer.Device) string {
	t.Helper()
	out, err := dev.Dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "endpoint="); ok {
			return v
		}
	}
	return ""
}

// engineWAN returns every WAN address g's engine takes WireGuard at.
func engineWAN(g *fastgw.Gateway) []netip.Addr {
	_, a4, a6 := g.Engine().WAN()
	return append([]netip.Addr{a4, a6}, g.Engine().WANAddrs()...)
}

// TestWANSecondaryAddress: WireGuard is taken at every address of the WAN,
// as Linux's WireGuard takes it at every address of the host. The WAN has
// a second address beside its first (a keepalived virtual address); a
// stock wireguard-go road warrior that knows the gateway only by that
// address (the gateway has no endpoint for it) handshakes and pings a LAN
// host, and what the gateway sends it leaves from that address (captured
// beside the WAN veth; the road warrior's endpoint for the gateway, which
// follows the source of what it authenticates, stays there), while the
// site peer on the first address keeps working. When the address is
// removed from the WAN, the gateway sends to the road warrior from the
// first address (its persistent keepalive here), the road warrior follows
// it (roaming) and reaches the LAN again. With IPv4 and IPv6 outer
// addresses.
func TestWANSecondaryAddress(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and two stock peers")
	testenv.Tool(t, "ping", "iputils-ping")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	for _, c := range []struct {
		name                        string
		outer6                      bool
		primary, secondary, rwOuter string
		rwPrefix, routerRW, rwNet   string
		routerWAN                   string // the router's address toward gwA
	}{
		{"ipv4", false, "198.18.1.1", "198.18.1.100", "198.18.3.2", "/24", "198.18.3.254", "198.18.3.0/24", "198.18.1.254"},
		{"ipv6", true, "2001:db8:f1::1", "2001:db8:f1::100", "2001:db8:f3::2", "/64", "2001:db8:f3::fe", "2001:db8:f3::/64", "2001:db8:f1::fe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := testenv.Topology(t, "wa")
			s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true, Outer6: c.outer6})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			port := func(a string) string { return netip.AddrPortFrom(netip.MustParseAddr(a), 51820).String() }
			rw, err := tp.NewNS("rw")
			if err != nil {
				t.Fatal(err)
			}
			v, err := tp.NewVeth(s.Router, rw, topo.VethConfig{})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{
				s.GwA.AddAddr(s.WANA, c.secondary+c.rwPrefix),
				s.Router.AddAddr(v.A, c.routerRW+c.rwPrefix),
				rw.AddAddr(v.B, c.rwOuter+c.rwPrefix),
				rw.AddRoute("default", c.routerRW, ""),
				s.GwA.AddRoute(c.rwNet, c.routerWAN, ""),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			rwKey, err := noise.NewPrivateKey()
			if err != nil {
				t.Fatal(err)
			}
			rwInner := netip.MustParsePrefix("198.19.101.2/32")
			cfg := s.FastConfig
			cfg.Peers = append(cfg.Peers, gateway.PeerConfig{PublicKey: rwKey.PublicKey(), AllowedIPs: []netip.Prefix{rwInner}, PersistentKeepalive: time.Second})
			var g *fastgw.Gateway
			if err := s.GwA.Do(func() (err error) {
				g, err = fastgw.Start(cfg)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			// The kernel lists IPv6 addresses newest first: the added one
			// is then the default source of its family (srcaddr.Choose),
			// the first one a further address. Either way both are ours.
			if got := engineWAN(g); !slices.Contains(got, netip.MustParseAddr(c.secondary)) || !slices.Contains(got, netip.MustParseAddr(c.primary)) {
				t.Fatalf("engine's WAN addresses = %v, want %s and %s in them", got, c.primary, c.secondary)
			}
			wan := ifaceWith(t, s.Router, c.routerWAN) // the router's end of gwA's WAN veth
			capt := testenv.StartCapture(t, tcpdump, s.Router, wan, t.TempDir()+"/wan.pcap", "udp and host "+c.rwOuter)
			rwDev, err := wgpeer.Start(rw, wgpeer.Config{
				Name: topo.UniqueName("wgrw"), PrivateKey: rwKey, ListenPort: 51820,
				Address: rwInner, Routes: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
				Peers: []wgpeer.Peer{{
					PublicKey: cfg.PrivateKey.PublicKey(), Endpoint: netip.MustParseAddrPort(port(c.secondary)),
					AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rwDev.Close)

			ping(t, rw, "198.19.1.10", 0)
			ping(t, s.HostB, "198.19.1.10", 0) // the site peer, on the first address
			if ep := stockEndpoint(t, rwDev); ep != port(c.secondary) {
				t.Errorf("road warrior's endpoint for the gateway = %q, want %s (the gateway answered from elsewhere); drops %s", ep, port(c.secondary), dropsString(g))
			}
			if ep := stockEndpoint(t, s.Stock); ep != port(c.primary) {
				t.Errorf("site peer's endpoint for the gateway = %q, want %s", ep, port(c.primary))
			}
			// The kernel hands captured frames to tcpdump a ring block at
			// a time (TPACKET_V3, with a timeout): wait until what was
			// sent is in the file before stopping it.
			sentFrom := " " + c.secondary + ".51820 > " + c.rwOuter + "."
			testenv.PollUntil(10*time.Second, func() bool {
				out, _ := s.Router.Run(tcpdump, "-n", "-r", capt.File())
				return strings.Contains(out, sentFrom)
			})
			fromGw, fromOther := 0, 0
			for _, l := range capt.Lines(t) {
				switch {
				case strings.Contains(l, sentFrom):
					fromGw++
				case strings.Contains(l, " > "+c.rwOuter+"."):
					fromOther++
					t.Errorf("sent to the road warrior from another address than %s: %s", c.secondary, l)
				}
			}
			if fromGw == 0 {
				t.Errorf("captured nothing from %s to the road warrior (%d from elsewhere)", c.secondary, fromOther)
			}

			// The address leaves the WAN: the road warrior is sent to from
			// the first address (its persistent keepalive every second)
			// and follows.
			delAddr(t, s.GwA, s.WANA, c.secondary+c.rwPrefix)
			if !testenv.PollUntil(10*time.Second, func() bool { return !slices.Contains(engineWAN(g), netip.MustParseAddr(c.secondary)) }) {
				t.Fatalf("engine's WAN addresses after the removal = %v, want %s gone", engineWAN(g), c.secondary)
			}
			if !testenv.PollUntil(10*time.Second, func() bool { return stockEndpoint(t, rwDev) == port(c.primary) }) {
				t.Fatalf("road warrior's endpoint for the gateway after %s left = %q, want %s; drops %s", c.secondary, stockEndpoint(t, rwDev), port(c.primary), dropsString(g))
			}
			ping(t, rw, "198.19.1.10", 0)
			ping(t, s.HostB, "198.19.1.10", 0)
		})
	}
}
