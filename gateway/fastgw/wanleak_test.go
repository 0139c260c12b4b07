//go:build linux

package fastgw_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestRemovedPeerNoCleartext: once a peer is removed over the UAPI, LAN
// traffic to its former allowed IPs, which the XDP program now leaves to
// the kernel, goes into the exception TUN and is dropped there, counted
// (no_route); the gateway's default route toward the WAN router never
// carries it out in cleartext, as it did while the removal deleted the
// routes into the exception TUN. So also after the exception TUN went
// down and up (the kernel removed its routes meanwhile).
func TestRemovedPeerNoCleartext(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, twosite.Config{Routed: true})
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan := testenv.StartCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.1.254"), t.TempDir()+"/wan.pcap", "ip or ip6")
	wgCmd(t, "set", s.GwName, "peer", s.FastConfig.Peers[0].PublicKey.String(), "remove")
	before := s.Gateway.Engine().Stats()
	const n = 50
	var noRoute uint64
	counted := func(want uint64) {
		testenv.PollUntil(5*time.Second, func() bool {
			noRoute = fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoRoute] - fastpath.TotalDrops(before)[fastpath.DropNoRoute]
			return noRoute >= want
		})
	}
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	counted(n)
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "down")
	runOK(t, s.GwA, "ip", "link", "set", s.GwName, "up")
	if !testenv.PollUntil(5*time.Second, func() bool {
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		return strings.Contains(routes, "198.19.2.0/24")
	}) {
		routes, _ := s.GwA.Run("ip", "route", "show", "dev", s.GwName)
		t.Errorf("after a down and up, %s lacks the removed peer's route:\n%s", s.GwName, routes)
	}
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	counted(2 * n)
	wan.Stop()
	if _, leaks := wanLeaks(t, wan.File()); len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d packets on the WAN are not WireGuard; the first: %s", len(leaks), leaks[0])
	}
	if noRoute < 2*n {
		lost, detail := lanPathLosses(t, s)
		t.Errorf("%d datagrams to the removed peer's allowed IPs, %d counted as no_route (LAN path losses %d: %s)", 2*n, noRoute, lost, detail)
	}
}

// wanLeaks is testenv.WANLeaks for the two sites' inner networks
// (198.19.0.0/16, 2001:db8:1::/48, 2001:db8:2::/48).
func wanLeaks(t *testing.T, file string) (frames int, leaks []string) {
	return testenv.WANLeaks(t, file, func(a netip.Addr) bool {
		return twosite.SitesNet.Contains(a) || netip.MustParsePrefix("2001:db8:1::/48").Contains(a) || netip.MustParsePrefix("2001:db8:2::/48").Contains(a)
	})
}

// TestRemovedPeerNoCleartextNoTUN: TestRemovedPeerNoCleartext for a
// gateway without an exception TUN (no Address), which has no route to
// keep: the removed peer's prefixes stay in the LAN XDP map, so the LAN's
// traffic to them reaches the engine, which drops it (no_route), and the
// gateway's default route toward the WAN router never carries it out in
// cleartext, as it did while the removal deleted them from the map.
func TestRemovedPeerNoCleartextNoTUN(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, twosite.Config{Routed: true, NoFastPath: true})
	fc := s.FastConfig
	fc.Addresses = nil
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan := testenv.StartCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.1.254"), t.TempDir()+"/wan.pcap", "ip or ip6")
	wgCmd(t, "set", s.GwName, "peer", fc.Peers[0].PublicKey.String(), "remove")
	before := s.Gateway.Engine().Stats()
	const n = 50
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
	var noRoute uint64
	testenv.PollUntil(5*time.Second, func() bool {
		noRoute = fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoRoute] - fastpath.TotalDrops(before)[fastpath.DropNoRoute]
		return noRoute >= n
	})
	wan.Stop()
	frames, leaks := wanLeaks(t, wan.File())
	if len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d of the %d frames on the WAN are not WireGuard; the first: %s", len(leaks), frames, leaks[0])
	}
	if noRoute < n {
		lost, detail := lanPathLosses(t, s)
		t.Errorf("%d datagrams to the removed peer's allowed IPs, %d counted as no_route (LAN path losses %d: %s)", n, noRoute, lost, detail)
	}
}
