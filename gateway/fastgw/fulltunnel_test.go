//go:build linux

package fastgw_test

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// TestFullTunnelStock: a road warrior (stock wireguard-go) that routes an
// "Internet" prefix (198.18.200.0/24 and 2001:db8:c8::/64, as a full
// tunnel routes 0.0.0.0/0 and ::/0) into its tunnel reaches a host there through a wgpio gateway whose
// kernel routes that prefix out of the WAN (its default route) and
// masquerades what leaves there (nftables, IPv4 and IPv6):
//
//	p1 ── inet (router; the Internet host 198.18.200.1, 2001:db8:c8::1) ── gw (wgpio) ── hl (its LAN)
//
// The gateway hands what it decrypts for the Internet to its kernel
// through the exception TUN; the kernel forwards it out of the WAN,
// NATed to the WAN's address, and the replies come back (conntrack)
// through the route of the road warrior's allowed IPs into the TUN, as
// with Linux's wg0. The Internet host sees the gateway's WAN address as
// the source, with TTL / hop limit 63 (one hop in all at the gateway);
// the replies reach the road warrior with 63.
func TestFullTunnelStock(t *testing.T) {
	r := newFullTunnelRig(t)
	g, p1, inet := r.g, r.p1, r.inet
	for _, dst := range []string{"198.18.200.1", "2001:db8:c8::1"} {
		out := pingOut(t, p1, dst)
		if !strings.Contains(out, "ttl=63") {
			t.Errorf("ping %s from p1: reply without ttl=63 (one hop at the gateway):\n%s", dst, out)
		}
	}
	// The LAN still answers through the fast path.
	pingOut(t, p1, "198.19.1.10")
	var toHost uint64
	for _, s := range g.Engine().Stats() {
		toHost += s.ToHost
	}
	if toHost < 2 {
		t.Errorf("the gateway's to_host = %d, want at least 2 (the pings answered)", toHost)
	}
	rules, err := inet.Run("nft", "list", "table", "inet", "count")
	if err != nil {
		t.Fatalf("nft list: %v\n%s", err, rules)
	}
	counts := regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(rules, -1)
	if len(counts) != 4 {
		t.Fatalf("nft counters: %s", rules)
	}
	for i, family := range []string{"IPv4", "IPv6"} {
		natted, _ := strconv.Atoi(counts[2*i][1])
		raw, _ := strconv.Atoi(counts[2*i+1][1])
		if natted < 1 || raw != 0 {
			t.Errorf("%s echo requests at the Internet host: %d from the gateway's WAN address with TTL 63, %d from the road warrior's; want at least 1, 0\n%s",
				family, natted, raw, rules)
		}
	}
	// The exception TUN, as Linux's wg0, has no IPv6 link-local address
	// (the host sent router solicitations and MLD reports into the
	// tunnel from one).
	out, err := r.gw.Run("ip", "-6", "-o", "addr", "show", "dev", r.name, "scope", "link")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("link-local addresses on the exception TUN %s: %v\n%s", r.name, err, out)
	}
	t.Logf("gateway drops: %s", dropsString(g))
}

// fullTunnelRig is TestFullTunnelStock's topology, gateway and road
// warrior (p1, tunnel addresses 198.19.101.2 and 2001:db8:65::2), for
// the tests that try to break the full-tunnel path.
type fullTunnelRig struct {
	gw, inet, p1, hl *topo.NS
	lan, wan, w1     *topo.Veth
	g                *fastgw.Gateway
	name             string // the gateway's exception TUN
}

// newFullTunnelRig builds fullTunnelRig, removed at the end of t.
func newFullTunnelRig(t *testing.T) *fullTunnelRig {
	testenv.Short(t, "builds namespaces and runs a gateway and a stock peer")
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Tool(t, "nft", "nftables")
	gw, inet, p1, hl, lan, wan, w1 := fullTunnelNet(t, "ft", true)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	nft := func(n *topo.NS, rules string) {
		t.Helper()
		cmd := n.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft in %s: %v\n%s\n%s", n.Name, err, out, rules)
		}
	}
	// Counters at the Internet host of the echo requests by source and
	// TTL.
	nft(inet, `table inet count {
	chain in {
		type filter hook input priority 0
		ip daddr 198.18.200.1 icmp type echo-request ip saddr 198.18.1.1 ip ttl 63 counter
		ip daddr 198.18.200.1 icmp type echo-request ip saddr 198.19.101.2 counter
		ip6 daddr 2001:db8:c8::1 icmpv6 type echo-request ip6 saddr 2001:db8:f1::1 ip6 hoplimit 63 counter
		ip6 daddr 2001:db8:c8::1 icmpv6 type echo-request ip6 saddr 2001:db8:65::2 counter
	}
}`)

	key := func() noise.PrivateKey {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	gwKey, k1 := key(), key()
	internet, internet6, site := netip.MustParsePrefix("198.18.200.0/24"), netip.MustParsePrefix("2001:db8:c8::/64"), netip.MustParsePrefix("198.19.1.0/24")
	var g *fastgw.Gateway
	excName := topo.UniqueName("wgftg")
	must(gw.Do(func() (err error) {
		g, err = fastgw.Start(fastgw.Config{
			Name: excName, PrivateKey: gwKey, ListenPort: 51820,
			WAN: wan.A, LAN: lan.A, Queues: 1,
			Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.101.1/24"), netip.MustParsePrefix("2001:db8:65::1/64")},
			Peers: []gateway.PeerConfig{{PublicKey: k1.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.2.2:51820"),
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.2/32"), netip.MustParsePrefix("2001:db8:65::2/128")}}},
		})
		return err
	}))
	t.Cleanup(func() { g.Close() })
	logOnFailure(t, g)
	// The peer starts after the gateway, so that its first initiation
	// reaches it (hairpin_test.go).
	name := topo.UniqueName("wgft")
	d, err := wgpeer.Start(p1, wgpeer.Config{
		Name: name, PrivateKey: k1, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.19.101.2/24"), Routes: []netip.Prefix{internet, internet6, site},
		Peers: []wgpeer.Peer{{PublicKey: gwKey.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.1.1:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.101.0/24"), netip.MustParsePrefix("2001:db8:65::/64"), internet, internet6, site,
				// The gateway kernel's ICMPv6 errors come from its WAN
				// address (a full tunnel's ::/0 holds it).
				netip.MustParsePrefix("2001:db8:f1::/64")}, Keepalive: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	must(p1.AddAddr(name, "2001:db8:65::2/64"))

	return &fullTunnelRig{gw: gw, inet: inet, p1: p1, hl: hl, lan: lan, wan: wan, w1: w1, g: g, name: excName}
}

// fullTunnelNet builds the full-tunnel rigs' network in namespaces of
// topology prefix (removed at the end of tb): the gateway gw (LAN lan.A
// 198.19.1.1/24, WAN wan.A 198.18.1.1/24, a default route to inet,
// forwarding on, the operator's masquerade rule on the WAN), the router
// inet with the Internet host 198.18.200.1, the road warrior p1
// (198.18.2.2/24 on w1.A, by way of inet) and the LAN host hl
// (198.19.1.10); with v6, the same over IPv6 on the WAN side
// (2001:db8:f1::/64, the Internet host 2001:db8:c8::1, p1 on
// 2001:db8:f2::/64).
func fullTunnelNet(tb testing.TB, prefix string, v6 bool) (gw, inet, p1, hl *topo.NS, lan, wan, w1 *topo.Veth) {
	tb.Helper()
	tp := testenv.Topology(tb, prefix)
	ns := func(role string) *topo.NS { return testenv.NS(tb, tp, role) }
	gw, inet, p1, hl = ns("gw"), ns("inet"), ns("p1"), ns("hl")
	veth := func(a, b *topo.NS) *topo.Veth { return testenv.Veth(tb, tp, a, b) }
	lan, wan, w1 = veth(gw, hl), veth(gw, inet), veth(p1, inet)
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(gw.AddAddr(lan.A, "198.19.1.1/24"))
	must(hl.AddAddr(lan.B, "198.19.1.10/24"))
	must(gw.AddAddr(wan.A, "198.18.1.1/24"))
	must(inet.AddAddr(wan.B, "198.18.1.254/24"))
	must(inet.AddAddr(wan.B, "198.18.200.1/32")) // the Internet host
	must(p1.AddAddr(w1.A, "198.18.2.2/24"))
	must(inet.AddAddr(w1.B, "198.18.2.254/24"))
	must(inet.Forwarding())
	must(p1.AddRoute("default", "198.18.2.254", ""))
	must(gw.AddRoute("default", "198.18.1.254", ""))
	must(hl.AddRoute("default", "198.19.1.1", ""))
	if v6 {
		must(gw.AddAddr(wan.A, "2001:db8:f1::1/64"))
		must(inet.AddAddr(wan.B, "2001:db8:f1::fe/64"))
		must(inet.AddAddr(wan.B, "2001:db8:c8::1/128"))
		must(p1.AddAddr(w1.A, "2001:db8:f2::2/64"))
		must(inet.AddAddr(w1.B, "2001:db8:f2::fe/64"))
		must(p1.AddRoute("default", "2001:db8:f2::fe", ""))
		must(gw.AddRoute("default", "2001:db8:f1::fe", ""))
	}
	must(gw.Forwarding())
	// The operator's NAT rule on the gateway's WAN.
	cmd := gw.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(`table inet nat {
	chain post {
		type nat hook postrouting priority 100
		oifname "` + wan.A + `" masquerade
	}
}`)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("nft in %s: %v\n%s", gw.Name, err, out)
	}
	return gw, inet, p1, hl, lan, wan, w1
}
