//go:build linux

package fastgw_test

import (
	"log/slog"
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
)

// renameLink renames dev in ns to name as a user does (set down, renamed,
// set up: Linux renames no interface that is up).
func renameLink(t *testing.T, ns *topo.NS, dev, name string) {
	t.Helper()
	for _, args := range [][]string{
		{"link", "set", "dev", dev, "down"},
		{"link", "set", "dev", dev, "name", name},
		{"link", "set", "dev", name, "up"},
	} {
		if out, err := ns.Run("ip", args...); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestInterfaceRenamed: the WAN and the LAN renamed under a running
// gateway (ip link set DEV name NEW) are followed by their indexes, which
// a rename keeps, as the kernel's routes, the XDP programs and the AF_XDP
// sockets follow them. An address added to the renamed WAN is taken at
// (the engine's WAN addresses hold it), and a stock wireguard-go road
// warrior whose endpoint is that address handshakes and reaches a LAN
// host; an MTU change of the renamed WAN is checked against the outer
// families of its addresses of now; an IPv6 address added to the renamed
// LAN becomes the engine's source of ICMPv6 errors toward the LAN. Each
// rename is logged once with both names, and no re-read fails. Before, the address follower read
// the interfaces by the names of start: the new address was not
// followed (the XDP program passed the road warrior's datagrams to the
// kernel, nothing answered), and "re-read the WAN interface after an
// address change; trying again ... no such interface" was logged every
// 5 s for as long as the gateway ran.
func TestInterfaceRenamed(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	const primary, added, rwOuter = "198.18.1.1", "198.18.1.13", "198.18.1.2"
	tp := testenv.Topology(t, "rn")
	ns := func(role string) *topo.NS { return testenv.NS(t, tp, role) }
	gw, rw, hl := ns("gw"), ns("rw"), ns("hl")
	wan, lan := testenv.Veth(t, tp, gw, rw), testenv.Veth(t, tp, gw, hl)
	for _, err := range []error{
		gw.AddAddr(wan.A, primary+"/24"),
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
	logs := new(testenv.LogBuffer)
	var g *fastgw.Gateway
	if err := gw.Do(func() (err error) {
		g, err = fastgw.Start(fastgw.Config{
			Name: topo.UniqueName("wgrn"), PrivateKey: gwKey, ListenPort: 51820,
			WAN: wan.A, LAN: lan.A, Queues: 1, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Peers: []gateway.PeerConfig{{PublicKey: rwKey.PublicKey(), AllowedIPs: []netip.Prefix{rwInner}}},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, g, logs)

	// The WAN renamed, then an address added to it.
	wanNew := tp.Name("r")
	renameLink(t, gw, wan.A, wanNew)
	waitUpAgain(t, logs, "WAN")
	if err := gw.AddAddr(wanNew, added+"/24"); err != nil {
		t.Fatal(err)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return slices.Contains(engineWAN(g), netip.MustParseAddr(added)) }) {
		t.Fatalf("engine's WAN addresses after %s was added to the renamed WAN %s = %v, want it in them", added, wanNew, engineWAN(g))
	}
	waitLogged(t, logs, `msg="WAN interface renamed; followed by its index as before" from=`+wan.A+" to="+wanNew, 1)
	rwDev, err := wgpeer.Start(rw, wgpeer.Config{
		Name: topo.UniqueName("wgrw"), PrivateKey: rwKey, ListenPort: 51820, Address: rwInner,
		Routes: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: gwKey.PublicKey(), Endpoint: netip.AddrPortFrom(netip.MustParseAddr(added), 51820),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rwDev.Close)
	ping(t, rw, "198.19.1.10", 0)
	if ep, want := stockEndpoint(t, rwDev), added+":51820"; ep != want {
		t.Errorf("road warrior's endpoint for the gateway = %q, want %s (answered from another address)", ep, want)
	}
	// An MTU change of the renamed WAN checks the outer families of
	// its addresses of now, read by its index.
	if out, err := gw.Run("ip", "link", "set", "dev", wanNew, "mtu", "1400"); err != nil {
		t.Fatalf("ip link set mtu: %v\n%s", err, out)
	}
	waitLogged(t, logs, "interface="+wanNew+" mtu=1400", 1)

	// The LAN renamed, then an IPv6 address added to it: the source of
	// the engine's ICMPv6 errors toward the LAN (it had none).
	lanNew := tp.Name("r")
	renameLink(t, gw, lan.A, lanNew)
	waitUpAgain(t, logs, "LAN")
	lan6 := netip.MustParseAddr("2001:db8:1::1")
	if err := gw.AddAddr(lanNew, lan6.String()+"/64"); err != nil {
		t.Fatal(err)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { _, a6 := g.Engine().LANAddrs(); return a6 == lan6 }) {
		_, a6 := g.Engine().LANAddrs()
		t.Fatalf("engine's LAN IPv6 source after %s was added to the renamed LAN %s = %v, want it", lan6, lanNew, a6)
	}
	waitLogged(t, logs, `msg="LAN interface renamed; followed by its index as before" from=`+lan.A+" to="+lanNew, 1)
	ping(t, rw, "198.19.1.10", 0)

	for _, line := range []string{"re-read the WAN interface", "re-read the LAN interface", "no such interface"} {
		if n := strings.Count(logs.String(), line); n > 0 {
			t.Errorf("%q logged %d times after the renames, want none", line, n)
		}
	}
	for _, line := range []string{"WAN interface renamed", "LAN interface renamed"} {
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("%q logged %d times, want once", line, n)
		}
	}
}

// waitUpAgain waits until the gateway logged side's link up again as
// often as down: the link follower may see the rename's down and up, or,
// when they came before it read the link, only the link up (neither
// logged). CI once waited 10 s, in compat mode's test, for an "up again"
// whose "down" never came.
func waitUpAgain(t *testing.T, logs *testenv.LogBuffer, side string) {
	t.Helper()
	balanced := func() bool {
		l := logs.String()
		return strings.Count(l, side+" link up again") >= strings.Count(l, side+" link down")
	}
	if !testenv.PollUntil(10*time.Second, balanced) {
		t.Fatalf("%s link down and not up again in the log:\n%s", side, logs.String())
	}
}
