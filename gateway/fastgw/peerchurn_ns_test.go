//go:build linux

package fastgw_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestPeerChurnNoCleartext: site B's peer is removed and added again ten
// times over the UAPI (wg set), a peer of a nested prefix of its
// networks (198.19.2.128/25) comes and goes meanwhile, and the LAN
// sends to site B all along: what the LAN sends while the peer is gone
// is dropped and counted (no_route), never carried out of the WAN in
// cleartext by the gateway's default route, and site B is reached again
// after each addition. With and without an exception TUN (the TUN keeps
// the removed prefixes' routes; without it they stay in the LAN map).
func TestPeerChurnNoCleartext(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	for _, tun := range []bool{true, false} {
		t.Run(fmt.Sprintf("exception TUN %v", tun), func(t *testing.T) {
			s := newSite(t, twosite.Config{Routed: true, NoFastPath: true})
			fc := s.FastConfig
			if !tun {
				fc.Addresses = nil
			}
			if err := s.GwA.Do(func() (err error) {
				s.Gateway, err = fastgw.Start(fc)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Gateway.Close() })
			if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
				t.Fatal(err)
			}
			if err := s.GwA.Forwarding(); err != nil {
				t.Fatal(err)
			}
			ping(t, s.HostA, twosite.HostB4.String(), 0)
			wan := testenv.StartCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.1.254"), t.TempDir()+"/wan.pcap", "ip or ip6")
			p := fc.Peers[0]
			var allowed []string
			for _, a := range p.AllowedIPs {
				allowed = append(allowed, a.String())
			}
			nested := "fPmNcx0FIvqkJcNMDAsQhrNKbzHPCGCcqcjmS3Sg7nY=" // a peer never heard from
			before := s.Gateway.Engine().Stats()
			const n = 20
			for round := range 10 {
				wgCmd(t, "set", s.GwName, "peer", nested, "allowed-ips", "198.19.2.128/25")
				wgCmd(t, "set", s.GwName, "peer", p.PublicKey.String(), "remove")
				testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
				if round%2 == 0 {
					wgCmd(t, "set", s.GwName, "peer", nested, "remove")
				}
				testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
				// Counted before the peer is back: the exception TUN's
				// packets are read a little later than the LAN's.
				testenv.PollUntil(5*time.Second, func() bool { return noRoute(s.Gateway, before) >= uint64(2*n*(round+1)) })
				wgCmd(t, "set", s.GwName, "peer", p.PublicKey.String(), "allowed-ips", strings.Join(allowed, ","), "endpoint", p.Endpoint.String())
				ping(t, s.HostA, twosite.HostB4.String(), 0)
			}
			wgCmd(t, "set", s.GwName, "peer", nested, "remove")
			// The kernel hands tcpdump a ring block at a time: wait for
			// the tunnel's frames of the last ping in the file.
			if !testenv.PollUntil(10*time.Second, func() bool {
				out, _ := s.Router.Run(tcpdump, "-n", "-r", wan.File())
				return strings.Count(out, "\n") >= 2
			}) {
				t.Error("the WAN capture holds no frame of the tunnel")
			}
			wan.Stop()
			frames, leaks := wanLeaks(t, wan.File())
			t.Logf("%d frames on the WAN", frames)
			if len(leaks) > 0 {
				t.Errorf("%d of the %d frames on the WAN are not WireGuard; the first: %s", len(leaks), frames, leaks[0])
			}
			if got := noRoute(s.Gateway, before); got != 10*2*n {
				lost, detail := lanPathLosses(t, s)
				t.Errorf("%d datagrams sent while the peer was gone, %d counted as no_route (LAN path losses %d: %s); drops %s", 10*2*n, got, lost, detail, dropsString(s.Gateway))
			}
		})
	}
}

// noRoute is the no_route drops of g since the stats before.
func noRoute(g *fastgw.Gateway, before []fastpath.QueueStats) uint64 {
	return fastpath.TotalDrops(g.Engine().Stats())[fastpath.DropNoRoute] - fastpath.TotalDrops(before)[fastpath.DropNoRoute]
}
