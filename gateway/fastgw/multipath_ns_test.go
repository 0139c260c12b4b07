//go:build linux

package fastgw_test

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestEndpointMultipathRoute: the endpoint's route is a multipath route
// over two routers on the WAN's segment (`ip route replace ... nexthop via
// R1 nexthop via R2`): the peer's datagrams go to the one router the
// route's hash picks for its endpoint by the next hops' weights, the
// second router listed and the first, the tunnel working throughout, as Linux's
// fib_select_multipath sends a destination by one next hop and spreads
// destinations over them. Before, every endpoint went by the first next
// hop listed: the second router of an ECMP pair never carried a peer.
func TestEndpointMultipathRoute(t *testing.T) {
	s := newSite(t, twosite.Config{Routed: true})
	logOnFailure(t, s.Gateway)
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	r1MAC, r2MAC := secondRouter(t, s)

	routes, err := arp.NewKernelRoutes(arp.KernelOptions{Namespace: s.GwA.NsHandle()})
	if err != nil {
		t.Fatal(err)
	}
	defer routes.Close()
	endpoint := netip.MustParseAddr("198.18.2.2")
	r1, r2 := netip.MustParseAddr("198.18.1.254"), netip.MustParseAddr("198.18.1.253")
	// Weights 1:255 give the first next hop 1/256 of the hash space: the
	// endpoint goes by the second (255 times in 256, whatever the run's
	// hash key), where the first next hop alone had carried it before;
	// then 255:1 by the first, R1 and R2 each listed first once.
	for i, order := range []struct {
		via     [2]netip.Addr
		weights [2]string
	}{{[2]netip.Addr{r1, r2}, [2]string{"1", "255"}}, {[2]netip.Addr{r2, r1}, [2]string{"255", "1"}}} {
		gwRoute(t, s, "replace", "198.18.2.0/24", "nexthop", "via", order.via[0].String(), "weight", order.weights[0],
			"nexthop", "via", order.via[1].String(), "weight", order.weights[1])
		var want netip.Addr
		if !testenv.PollUntil(2*time.Second, func() bool {
			rt, ok := routes.Route(endpoint)
			want, _ = rt.Path(endpoint)
			return ok && len(rt.Paths()) == 2 && rt.Paths()[0].Gateway == order.via[0]
		}) {
			t.Fatalf("route %d: the multipath route not followed", i)
		}
		wantMAC, otherMAC := r1MAC, r2MAC
		if want == r2 {
			wantMAC, otherMAC = r2MAC, r1MAC
		}
		ping(t, s.HostA, twosite.HostB4.String(), 0) // the next hop resolved, the old MAC left
		time.Sleep(200 * time.Millisecond)           // a tick or two after
		dir := t.TempDir()
		tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
		to := testenv.StartCapture(t, tcpdump, s.Router, s.RouterA, filepath.Join(dir, "want.pcap"),
			"ether dst "+wantMAC+" and udp and dst host 198.18.2.2")
		off := testenv.StartCapture(t, tcpdump, s.Router, s.RouterA, filepath.Join(dir, "other.pcap"),
			"ether dst "+otherMAC+" and udp and dst host 198.18.2.2")
		ping(t, s.HostA, twosite.HostB4.String(), 0)
		if out, _ := s.HostA.Run("ping", "-c", "5", "-i", "0.05", "-W", "1", twosite.HostB4.String()); !strings.Contains(out, " 0% packet loss") {
			t.Errorf("route %d (%v first): pings lost:\n%s", i, order.via[0], out)
		}
		got, stray := frames(t, to), frames(t, off)
		if got == 0 || stray != 0 {
			t.Errorf("route %d (%v first, the hash picks %v): %d datagrams to it, %d to the other router", i, order.via[0], want, got, stray)
		}
		t.Logf("route %d (%v first, weights %v): by %v, %d datagrams, %d to the other", i, order.via[0], order.weights, want, got, stray)
	}
}

// frames counts the datagrams a capture saw (tcpdump's own lines left out).
func frames(t *testing.T, c *testenv.Capture) int {
	n := 0
	for _, l := range c.Lines(t) {
		if strings.Contains(l, "> 198.18.2.2.") {
			n++
		}
	}
	return n
}

// secondRouter puts a second router, 198.18.1.253, on the segment between
// gwA and the site's router: the router's interface toward gwA becomes a
// port of a bridge (br50, with the interface's MAC and addresses), and a
// new namespace forwards what it gets back to 198.18.1.254, without
// redirects. It returns the MACs that frames to 198.18.1.254 and to
// 198.18.1.253 carry.
func secondRouter(t *testing.T, s *twosite.Site) (r1MAC, r2MAC string) {
	t.Helper()
	tp := testenv.Topology(t, "mp")
	r2 := testenv.NS(t, tp, "r2")
	mac, err := s.Router.LinkMAC(s.RouterA)
	if err != nil {
		t.Fatal(err)
	}
	run := func(ns *topo.NS, args ...string) {
		t.Helper()
		if out, err := ns.Run(args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(s.Router, "ip", "link", "add", "br50", "address", mac.String(), "type", "bridge")
	run(s.Router, "ip", "addr", "flush", "dev", s.RouterA)
	run(s.Router, "ip", "link", "set", s.RouterA, "master", "br50")
	run(s.Router, "ip", "link", "set", "br50", "up")
	run(s.Router, "ip", "addr", "add", "198.18.1.254/24", "dev", "br50")
	v, err := tp.NewVeth(s.Router, r2, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run(s.Router, "ip", "link", "set", v.A, "master", "br50")
	if err := r2.AddAddr(v.B, "198.18.1.253/24"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"net.ipv4.conf.all.send_redirects", "net.ipv4.conf." + v.B + ".send_redirects"} {
		if err := r2.Sysctl(k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r2.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := r2.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := r2.Ping(netip.MustParseAddr("198.18.1.254"), 5*time.Second); err != nil {
		t.Fatalf("the second router does not reach the first: %v", err)
	}
	m2, err := r2.LinkMAC(v.B)
	if err != nil {
		t.Fatal(err)
	}
	return mac.String(), m2.String()
}

// TestIdlePeerRouteMoved: the endpoint's route moves while the tunnel is
// idle (to the second router, then to a next hop that answers no ARP);
// the first packet after goes by the new next hop, or waits for it,
// never to the old router, as wg0's cached route is invalidated by the
// change. Before, an idle peer was looked at only when it sent again: its
// first datagrams went to the old router (through the silent next hop's
// route, the old router answered them). Found by a helper.
func TestIdlePeerRouteMoved(t *testing.T) {
	s := newSite(t, twosite.Config{Routed: true})
	logOnFailure(t, s.Gateway)
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	r1MAC, r2MAC := secondRouter(t, s)
	if out, err := s.GwA.Run("ping", "-c", "1", "-W", "1", "198.18.1.253"); err != nil { // R2's MAC known to the kernel
		t.Fatalf("the second router: %v\n%s", err, out)
	}
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	for _, step := range []struct {
		via, was, mac string
		answered      bool
	}{{"198.18.1.253", r1MAC, r2MAC, true}, {"198.18.1.252", r2MAC, "", false}} {
		gwRoute(t, s, "replace", "198.18.2.0/24", "via", step.via)
		time.Sleep(time.Second) // idle: several ticks, no packet
		dir := t.TempDir()
		old := testenv.StartCapture(t, tcpdump, s.Router, s.RouterA, filepath.Join(dir, "old.pcap"),
			"ether dst "+step.was+" and udp and dst host 198.18.2.2")
		var by *testenv.Capture
		if step.mac != "" {
			by = testenv.StartCapture(t, tcpdump, s.Router, s.RouterA, filepath.Join(dir, "new.pcap"),
				"ether dst "+step.mac+" and udp and dst host 198.18.2.2")
		}
		out, _ := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB4.String())
		if answered := strings.Contains(out, " 0% packet loss"); answered != step.answered {
			t.Errorf("via %s: ping answered %v, want %v:\n%s", step.via, answered, step.answered, out)
		}
		if n := frames(t, old); n != 0 {
			t.Errorf("via %s: %d datagrams to the old router after the idle route change", step.via, n)
		}
		if by != nil && frames(t, by) == 0 {
			t.Errorf("via %s: nothing sent to it", step.via)
		}
	}
	gwRoute(t, s, "replace", "198.18.2.0/24", "via", "198.18.1.254")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
}
