//go:build linux

package compatgw

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
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
// compat gateway (ip link set DEV name NEW) are followed by their
// indexes, which a rename keeps, as its ports and the kernel's routes
// follow them. An address added to the renamed WAN is taken at: a stock
// wireguard-go peer whose endpoint is that address handshakes and pings
// the LAN host through it; an MTU change of the renamed WAN is checked
// against the outer families of its addresses of now; a link-local
// address added to the renamed LAN
// (which makes none of its own: addr_gen_mode 1) becomes the LAN
// device's source of ICMPv6 errors to link-local hosts. Each rename is
// logged once with both names, and no re-read fails. Before, the address
// follower read the interfaces by the names of start: the new addresses
// were not followed, and "re-read the WAN interface after an address
// change; trying again ... no such interface" was logged every 5 s for as
// long as the gateway ran.
func TestInterfaceRenamed(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	gwKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	peerKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	logs := new(testenv.LogBuffer)
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + gwKey.Hex() + "\nlisten_port=51820\n" +
			"public_key=" + peerKey.PublicKey().Hex() + "\nallowed_ip=198.18.9.1/32\n"
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway's log:\n%s", logs.String())
		}
	})

	// The WAN renamed, then an address added to it.
	wanNew := topo.UniqueName("cgr")
	renameLink(t, s.gw, s.wanDev, wanNew)
	waitUpAgain(t, logs, "WAN")
	added := netip.MustParseAddrPort("198.18.0.13:51820")
	if err := s.gw.AddAddr(wanNew, added.Addr().String()+"/24"); err != nil {
		t.Fatal(err)
	}
	if !s.reachesWGWithin(t, added, 10*time.Second) {
		t.Fatalf("a datagram to %v, added to the renamed WAN %s, did not reach wireguard-go", added, wanNew)
	}
	waitLogged(t, logs, `msg="WAN interface renamed; followed by its index as before" from=`+s.wanDev+" to="+wanNew)
	peer, err := wgpeer.Start(s.peer, wgpeer.Config{
		Name: topo.UniqueName("wgcp"), PrivateKey: peerKey, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.18.9.1/32"), Routes: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: gwKey.PublicKey(), Endpoint: added,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	if err := s.peer.Ping(netip.MustParseAddr("198.18.1.2"), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// An MTU change of the renamed WAN checks the outer families of
	// its addresses of now, read by its index.
	if out, err := s.gw.Run("ip", "link", "set", "dev", wanNew, "mtu", "1400"); err != nil {
		t.Fatalf("ip link set mtu: %v\n%s", err, out)
	}
	waitLogged(t, logs, "interface="+wanNew+" mtu=1400")

	// The LAN renamed, then a link-local address added to it.
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf." + s.lanDev + ".addr_gen_mode=1"},
		{"ip", "-6", "address", "flush", "dev", s.lanDev, "scope", "link"},
	} {
		if out, err := s.gw.Run(args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return !s.g.lanDev.ICMPLinkLocal().IsValid() }) {
		t.Fatalf("the LAN device's link-local source is %v with the LAN's link-local addresses flushed, want none", s.g.lanDev.ICMPLinkLocal())
	}
	lanNew := topo.UniqueName("cgr")
	renameLink(t, s.gw, s.lanDev, lanNew)
	waitUpAgain(t, logs, "LAN")
	ll := netip.MustParseAddr("fe80::13")
	if err := s.gw.AddAddr(lanNew, ll.String()+"/64"); err != nil {
		t.Fatal(err)
	}
	if !testenv.PollUntil(10*time.Second, func() bool { return s.g.lanDev.ICMPLinkLocal() == ll }) {
		t.Fatalf("the LAN device's link-local source is %v after %v was added to the renamed LAN %s, want it", s.g.lanDev.ICMPLinkLocal(), ll, lanNew)
	}
	waitLogged(t, logs, `msg="LAN interface renamed; followed by its index as before" from=`+s.lanDev+" to="+lanNew)
	if err := s.peer.Ping(netip.MustParseAddr("198.18.1.2"), 10*time.Second); err != nil {
		t.Fatal(err)
	}

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

// waitLogged waits up to 10 s until logs holds line.
func waitLogged(t *testing.T, logs *testenv.LogBuffer, line string) {
	t.Helper()
	if !testenv.PollUntil(10*time.Second, func() bool { return strings.Contains(logs.String(), line) }) {
		t.Fatalf("%q not in the log:\n%s", line, logs.String())
	}
}

// waitUpAgain waits until the gateway logged side's link up again as
// often as down: the link follower may see the rename's down and up, or,
// when they came before it read the link, only the link up (neither
// logged). CI once waited 10 s for an "up again" whose "down" never came.
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
