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

// TestPeerToPeerStock: a wgpio hub with two road warriors, stock
// wireguard-go each in its own namespace behind a router:
//
//	p1 ── rt ── hub (wgpio fast path) ── hl (its LAN)
//	p2 ──┘
//
// p1 (tunnel address 198.19.101.2, 2001:db8:65::2) pings p2 (.3, ::3)
// through the hub, IPv4 and IPv6: the hub sends what it decrypts from one
// back into the tunnel to the other (cryptokey routing, whitepaper §2), as
// a Linux router's wg0 does, and lowers the TTL / hop limit once (the
// replies arrive with 63).
func TestPeerToPeerStock(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway and two stock peers")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "hp")
	ns := func(role string) *topo.NS { return testenv.NS(t, tp, role) }
	hub, rt, p1, p2, hl := ns("hub"), ns("rt"), ns("p1"), ns("p2"), ns("hl")
	veth := func(a, b *topo.NS) *topo.Veth { return testenv.Veth(t, tp, a, b) }
	lan, wan, w1, w2 := veth(hub, hl), veth(hub, rt), veth(p1, rt), veth(p2, rt)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(hub.AddAddr(lan.A, "198.19.1.1/24"))
	must(hl.AddAddr(lan.B, "198.19.1.10/24"))
	must(hub.AddAddr(wan.A, "198.18.1.1/24"))
	must(rt.AddAddr(wan.B, "198.18.1.254/24"))
	must(p1.AddAddr(w1.A, "198.18.2.2/24"))
	must(rt.AddAddr(w1.B, "198.18.2.254/24"))
	must(p2.AddAddr(w2.A, "198.18.3.2/24"))
	must(rt.AddAddr(w2.B, "198.18.3.254/24"))
	must(rt.Forwarding())
	must(hub.AddRoute("198.18.2.0/24", "198.18.1.254", ""))
	must(hub.AddRoute("198.18.3.0/24", "198.18.1.254", ""))
	must(p1.AddRoute("default", "198.18.2.254", ""))
	must(p2.AddRoute("default", "198.18.3.254", ""))

	key := func() noise.PrivateKey {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	hubKey, k1, k2 := key(), key(), key()
	hubEnd := netip.MustParseAddrPort("198.18.1.1:51820")
	tunnel := []netip.Prefix{netip.MustParsePrefix("198.19.101.0/24"), netip.MustParsePrefix("2001:db8:65::/64")}
	warrior := func(n *topo.NS, k noise.PrivateKey, a4, a6 string) {
		name := topo.UniqueName("wghp")
		d, err := wgpeer.Start(n, wgpeer.Config{
			Name: name, PrivateKey: k, ListenPort: 51820,
			Address: netip.MustParsePrefix(a4 + "/24"),
			Peers:   []wgpeer.Peer{{PublicKey: hubKey.PublicKey(), Endpoint: hubEnd, AllowedIPs: tunnel, Keepalive: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		must(n.AddAddr(name, a6+"/64"))
	}
	var g *fastgw.Gateway
	must(hub.Do(func() (err error) {
		g, err = fastgw.Start(fastgw.Config{
			Name: topo.UniqueName("wghub"), PrivateKey: hubKey, ListenPort: 51820,
			WAN: wan.A, LAN: lan.A, Queues: 1,
			Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.101.1/24"), netip.MustParsePrefix("2001:db8:65::1/64")},
			Peers: []gateway.PeerConfig{
				{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.2.2:51820"),
					AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32"), netip.MustParsePrefix("2001:db8:65::2/128")}},
				{PublicKey: k2.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.3.2:51820"),
					AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.3/32"), netip.MustParsePrefix("2001:db8:65::3/128")}},
			},
		})
		return err
	}))
	t.Cleanup(func() { g.Close() })
	logOnFailure(t, g)
	// The peers start after the hub, so that their first initiations
	// reach it: started before, they would wait 5 s (REKEY_TIMEOUT) to
	// retry, and one retry lost would leave the pings too little time.
	warrior(p1, k1, "198.19.101.2", "2001:db8:65::2")
	warrior(p2, k2, "198.19.101.3", "2001:db8:65::3")

	for _, c := range []struct {
		from *topo.NS
		dst  string
	}{
		{p1, "198.19.101.3"}, {p2, "198.19.101.2"}, {p1, "2001:db8:65::3"}, {p2, "2001:db8:65::2"},
	} {
		out := pingOut(t, c.from, c.dst)
		// The reply left its sender with 64 and crossed one router.
		if !strings.Contains(out, "ttl=63") {
			t.Errorf("ping %s from %s: reply without ttl=63 (one hop at the hub):\n%s", c.dst, c.from.Name, out)
		}
	}
	var p2p uint64
	for _, s := range g.Engine().Stats() {
		p2p += s.PeerToPeer
	}
	if p2p < 8 {
		t.Errorf("the hub's peer_to_peer = %d, want at least 8 (the pings and their replies)", p2p)
	}
	t.Logf("hub drops: %s", dropsString(g))
}

// pingOut runs ping in ns until one reply (the first waits for the
// handshakes) or 10 s, and returns the output of the one answered.
func pingOut(t *testing.T, ns *topo.NS, dst string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := ns.Run("ping", "-c", "1", "-W", "1", dst)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping %s from %s: %v\n%s", dst, ns.Name, err, out)
		}
	}
}
