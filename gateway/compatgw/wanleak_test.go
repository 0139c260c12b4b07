//go:build linux

package compatgw

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestRemovedPeerNoCleartext: once the peer is removed, over the UAPI
// socket (wg set) or from Go (Device().IpcSet, then a periodic sync), the
// LAN's traffic to its former allowed IPs still reaches the PortDevice
// (its prefixes stay in the LAN XDP filter), which drops it before
// wireguard-go and counts it (no_route); the gateway host's default route
// toward the WAN router never carries it out in cleartext, as it did
// while the sync deleted the prefixes from the filter (fast-path mode's
// TestRemovedPeerNoCleartextNoTUN). Configured again, the prefix carries
// traffic through the tunnel again.
func TestRemovedPeerNoCleartext(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	wgBin := testenv.Tool(t, "wg", "wireguard-tools")
	testenv.Tool(t, "ping", "iputils-ping")
	s, g, wan := routedCompat(t, "cl", tcpdump, nil)
	noRoute := func() uint64 { return g.Stats().LAN.Drops[tundev.PortDropNoRoute] }
	const n = 50
	key := s.FastConfig.Peers[0].PublicKey
	removed := func(how string) {
		t.Helper()
		before := noRoute()
		testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
		testenv.PollUntil(5*time.Second, func() bool { return noRoute()-before >= n })
		if got := noRoute() - before; got < n {
			st := g.Stats().LAN
			t.Errorf("peer removed %s: %d datagrams to its allowed IPs, %d counted as no_route; LAN: %d read, drops %v", how, n, got, st.RXPackets, st.Drops.List())
		}
	}

	if out, err := exec.Command(wgBin, "set", s.GwName, "peer", key.String(), "remove").CombinedOutput(); err != nil {
		t.Fatalf("wg set remove: %v\n%s", err, out)
	}
	removed("over the UAPI socket")

	// Configured again, the prefix is the tunnel's again.
	uapi := compatFile(s).UAPI()
	uapiPeer := uapi[strings.Index(uapi, "public_key="):]
	if err := g.Device().IpcSet(uapiPeer); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatalf("after the peer came back: %v", err)
	}
	// From Go: the sync that follows finds the peer gone.
	if err := g.Device().IpcSet(fmt.Sprintf("public_key=%x\nremove=true\n", key[:])); err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("198.19.2.0/24")
	if !testenv.PollUntil(5*time.Second, func() bool { // a sync saw the peer gone
		g.mu.Lock()
		defer g.mu.Unlock()
		_, kept := g.kept[pfx]
		return kept || !g.prefixes[pfx]
	}) {
		t.Fatalf("no sync in 5 s saw the peer removed from Go")
	}
	removed("from Go")

	frames, leaks := wanLeaks(t, wan)
	if frames == 0 {
		t.Error("the WAN capture holds no frame, not even the tunnel's: the leak check saw nothing")
	}
	if len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d of the %d frames on the WAN carry an inner address (cleartext); the first: %s", len(leaks), frames, leaks[0])
	}
}

// compatFile is site A's gateway configuration (s.FastConfig) as a
// configuration file: its key, port and peers.
func compatFile(s *twosite.Site) *config.File {
	fc := s.FastConfig
	f := &config.File{Interface: config.Interface{PrivateKey: fc.PrivateKey, ListenPort: fc.ListenPort}}
	for _, p := range fc.Peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs})
	}
	return f
}

// routedCompat builds the routed two sites (namespaces named from
// prefix) with site A's gateway in compat mode (SyncInterval 50 ms),
// gives site A's gateway host a default route toward the WAN router and
// forwarding (so that what the LAN XDP filter leaves to the kernel could
// leave by the WAN in cleartext), checks that host A reaches host B, and
// starts a capture on the WAN router's side of site A's WAN. setup, if
// not nil, runs before the gateway starts and may change its Config.
func routedCompat(t *testing.T, prefix, tcpdump string, setup func(*twosite.Site, *Config)) (*twosite.Site, *Gateway, *testenv.Capture) {
	t.Helper()
	tp := testenv.Topology(t, prefix)
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Stock.PinBind(); err != nil {
		t.Fatal(err)
	}
	fc, f := s.FastConfig, compatFile(s)
	cfg := Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
		SyncInterval: 50 * time.Millisecond}
	if setup != nil {
		setup(s, &cfg)
	}
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	return s, g, wanCapture(t, tcpdump, s.Router, s.Router.Name+"-wanleak")
}

// wanCapture runs tcpdump (testenv.StartCapture) on ns's interface that
// has the WAN router's address 198.18.1.254, writing name.pcap in a
// temporary directory.
func wanCapture(t *testing.T, tcpdump string, ns *topo.NS, name string) *testenv.Capture {
	t.Helper()
	out, err := ns.Run("ip", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	dev := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[3], "198.18.1.254/") {
			dev = strings.TrimSuffix(f[1], ":")
		}
	}
	if dev == "" {
		t.Fatalf("%s has no address 198.18.1.254:\n%s", ns.Name, out)
	}
	return testenv.StartCapture(t, tcpdump, ns, dev, t.TempDir()+"/"+name+".pcap", "ip or ip6")
}

// wanLeaks is testenv.WANLeaks for c's file (which it stops first) and
// the sites' inner networks (twosite.SitesNet, 2001:db8:1::/48,
// 2001:db8:2::/48).
func wanLeaks(t *testing.T, c *testenv.Capture) (frames int, leaks []string) {
	c.Stop()
	return testenv.WANLeaks(t, c.File(), func(a netip.Addr) bool {
		return twosite.SitesNet.Contains(a) || netip.MustParsePrefix("2001:db8:1::/48").Contains(a) || netip.MustParsePrefix("2001:db8:2::/48").Contains(a)
	})
}
