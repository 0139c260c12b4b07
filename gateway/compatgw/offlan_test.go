//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// TestOffLAN: a decrypted packet whose route in the hub's main table leads
// off the LAN is dropped and counted as off_lan, and nothing of it appears
// on the LAN, where it went to the LAN's default router before (the LAN
// device looked in the LAN's routes alone): from a stock wireguard-go
// road warrior whose peer for the hub takes everything (a full tunnel,
// AllowedIPs = 0.0.0.0/0, ::/0), toward a network the hub routes through
// a second interface (IPv4 and IPv6), one it routes out of the WAN by a
// route more specific than the LAN's default, and one its table makes
// unreachable. Linux's wg0 hands such packets to the kernel, which
// forwards them there; compat mode has no way into the kernel. What the
// LAN's default route takes still reaches the LAN's router (the capture's
// own check). With the LAN set down, what the tunnel sends its hosts is
// off_lan too (the kernel removed the LAN's routes).
func TestOffLAN(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a compat hub and a stock peer")
	testenv.Tool(t, "ping", "iputils-ping")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	tp := testenv.Topology(t, "col")
	hub, p1, hl, x := testenv.NS(t, tp, "hub"), testenv.NS(t, tp, "p1"), testenv.NS(t, tp, "hl"), testenv.NS(t, tp, "x")
	lan, wan, other := testenv.Veth(t, tp, hub, hl), testenv.Veth(t, tp, hub, p1), testenv.Veth(t, tp, hub, x)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	run := func(ns *topo.NS, args ...string) {
		t.Helper()
		if out, err := ns.Run("ip", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	must(hub.AddAddr(lan.A, "198.19.1.1/24"))
	must(hub.AddAddr(lan.A, "2001:db8:1::1/64"))
	must(hl.AddAddr(lan.B, "198.19.1.10/24"))
	must(hl.AddAddr(lan.B, "2001:db8:1::10/64"))
	must(hub.AddAddr(wan.A, "198.18.1.1/24"))
	must(p1.AddAddr(wan.B, "198.18.1.2/24"))
	must(hub.AddAddr(other.A, "198.18.40.1/24"))
	must(hub.AddAddr(other.A, "2001:db8:40::1/64"))
	must(x.AddAddr(other.B, "198.18.40.2/24"))
	must(x.AddAddr(other.B, "2001:db8:40::2/64"))
	// The hub's table: the LAN's router takes the rest (IPv4 and IPv6);
	// a network behind the second link and one out of the WAN by more
	// specific routes; one unreachable.
	run(hub, "route", "add", "default", "via", "198.19.1.10")
	run(hub, "-6", "route", "add", "default", "via", "2001:db8:1::10")
	run(hub, "route", "add", "198.18.50.0/24", "via", "198.18.40.2")
	run(hub, "-6", "route", "add", "2001:db8:50::/64", "via", "2001:db8:40::2")
	run(hub, "route", "add", "198.18.70.0/24", "via", "198.18.1.2")
	run(hub, "route", "add", "unreachable", "198.18.51.0/24")
	run(hl, "route", "add", "198.19.101.0/24", "via", "198.19.1.1")

	key := func() noise.PrivateKey {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	hubKey, k1 := key(), key()
	dests := []string{"198.18.50.0/24", "198.18.51.0/24", "198.18.60.0/24", "198.18.70.0/24", "198.19.1.0/24", "2001:db8:50::/64", "2001:db8:60::/64"}
	var routes []netip.Prefix
	for _, d := range dests {
		routes = append(routes, netip.MustParsePrefix(d))
	}
	f := &config.File{Interface: config.Interface{PrivateKey: hubKey, ListenPort: 51820}, Peers: []config.Peer{
		{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.1.2:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32"), netip.MustParsePrefix("2001:db8:65::2/128")}},
	}}
	var g *Gateway
	must(hub.Do(func() (err error) {
		g, err = Start(Config{Name: topo.UniqueName("wgoh"), UAPI: f.UAPI(), ListenPort: 51820, WAN: wan.A, LAN: lan.A, Queues: 1,
			SyncInterval: 50 * time.Millisecond})
		return err
	}))
	t.Cleanup(func() { g.Close() })
	// The peer starts after the hub, so that its first initiation
	// reaches it (TestRouterStock).
	name := topo.UniqueName("wgol")
	d, err := wgpeer.Start(p1, wgpeer.Config{
		Name: name, PrivateKey: k1, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.19.101.2/24"), Routes: routes,
		Peers: []wgpeer.Peer{{PublicKey: hubKey.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.1.1:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, Keepalive: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	must(p1.AddAddr(name, "2001:db8:65::2/64"))
	pingOut(t, p1, "198.19.1.10") // the session is up

	capture := testenv.StartCapture(t, tcpdump, hl, lan.B, t.TempDir()+"/lan.pcap", "ip or ip6")
	const n, port = 20, 9400
	offLAN := []string{"198.18.50.5", "198.18.51.5", "198.18.70.5", "2001:db8:50::5"}
	toLAN := []string{"198.18.60.5", "2001:db8:60::5"} // the LAN's default routes
	before := g.Stats().LAN
	for _, dst := range append(append([]string{}, offLAN...), toLAN...) {
		testenv.SendUDP(t, p1, netip.AddrPortFrom(netip.MustParseAddr(dst), port), n)
	}
	want := uint64(n * len(offLAN))
	var st tundev.PortStats
	testenv.PollUntil(10*time.Second, func() bool {
		st = g.Stats().LAN
		return st.Drops[tundev.PortDropOffLAN]-before.Drops[tundev.PortDropOffLAN] >= want &&
			st.TXPackets-before.TXPackets >= uint64(n*len(toLAN))
	})
	if got := st.Drops[tundev.PortDropOffLAN] - before.Drops[tundev.PortDropOffLAN]; got != want {
		t.Errorf("%d datagrams to each of %v: off_lan %d, want %d (LAN device drops %v)", n, offLAN, got, want, st.Drops.List())
	}
	if got := st.TXPackets - before.TXPackets; got != uint64(n*len(toLAN)) {
		t.Errorf("the LAN device sent %d packets, want %d (those to %v)", got, n*len(toLAN), toLAN)
	}
	count := map[string]int{}
	for _, line := range capture.Lines(t) {
		for _, dst := range append(append([]string{}, offLAN...), toLAN...) {
			if strings.Contains(line, " > "+dst+"."+"9400") {
				count[dst]++
			}
		}
	}
	for _, dst := range offLAN {
		if count[dst] != 0 {
			t.Errorf("%d datagrams to %v on the LAN, want none (its route leads off the LAN)", count[dst], dst)
		}
	}
	for _, dst := range toLAN {
		if count[dst] != n {
			t.Errorf("%d datagrams to %v on the LAN, want %d (the LAN's default route)", count[dst], dst, n)
		}
	}

	// The LAN set down: the kernel removes its routes, and what the
	// tunnel sends its hosts has no route out of the LAN (README, "The
	// WAN or LAN going down").
	run(hub, "link", "set", lan.A, "down")
	// The route follower takes the kernel's change in its own time: a
	// datagram at a time until one is counted off_lan, then the count
	// (a probe still on its way may add to it: at least n; those before
	// the change went to the LAN, and were all through before the
	// counted one).
	dst := netip.AddrPortFrom(netip.MustParseAddr("198.19.1.10"), port)
	probe := g.Stats().LAN.Drops[tundev.PortDropOffLAN]
	testenv.PollUntil(10*time.Second, func() bool {
		testenv.SendUDP(t, p1, dst, 1)
		time.Sleep(20 * time.Millisecond)
		return g.Stats().LAN.Drops[tundev.PortDropOffLAN] > probe
	})
	before = g.Stats().LAN
	testenv.SendUDP(t, p1, dst, n)
	testenv.PollUntil(10*time.Second, func() bool {
		st = g.Stats().LAN
		return st.Drops[tundev.PortDropOffLAN]-before.Drops[tundev.PortDropOffLAN] >= n
	})
	if got := st.Drops[tundev.PortDropOffLAN] - before.Drops[tundev.PortDropOffLAN]; got < n || st.TXPackets != before.TXPackets {
		t.Errorf("LAN down, %d datagrams to its host: off_lan %d, sent %d; want %d, 0 (LAN device drops %v)", n, got, st.TXPackets-before.TXPackets, n, st.Drops.List())
	}
}
