//go:build linux

package compatgw

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// listenUDP4 listens on UDP port in ns, every IPv4 address (broadcasts
// included), until the test ends.
func listenUDP4(t *testing.T, ns *topo.NS, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// received is how many datagrams c holds: it waits up to first for the
// first, then reads until none comes for 200 ms. A test that expects one
// passes a minute, which bounds only a datagram that never comes (200 ms
// left its delivery through the LAN's XDP program and the gateway
// host's kernel to the load of the machine); one that expects none, 200
// ms once the gateway has counted the packets.
func received(c *net.UDPConn, first time.Duration) int {
	b := make([]byte, 2048)
	for n := 0; ; n++ {
		wait := 200 * time.Millisecond
		if n == 0 {
			wait = first
		}
		c.SetReadDeadline(time.Now().Add(wait))
		if _, _, err := c.ReadFromUDP(b); err != nil {
			return n
		}
	}
}

// onlyLink is the name of ns's one interface besides lo.
func onlyLink(t *testing.T, ns *topo.NS) string {
	t.Helper()
	links, err := ns.Handle().LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback == 0 {
			return l.Attrs().Name
		}
	}
	t.Fatalf("no interface in %s", ns.Name)
	return ""
}

// TestHostAddrsLocal: a decrypted packet to the gateway host's own
// addresses, which Linux delivers locally and forwards none of (the LAN
// prefix's directed broadcast 198.19.1.255, the LAN address, the tunnel
// address), is dropped by compat mode's LAN device as local (it has no
// way into the host's stack): not sent to the LAN (host A's listener gets
// nothing), no neighbour asked of the kernel (no entry for them), no
// "host unreachable" back to host B. Before, each waited a second for a
// neighbour that never answers, holding up the peer's packets behind it
// (no_neighbour; the LAN address answered "host unreachable" from
// itself), and the tunnel address, inside the peer's allowed IPs, went
// back into the tunnel. And a LAN
// frame to the gateway's MAC for the directed broadcast (allowed IPs
// 198.19.0.0/16 hold it) is the host's, as in fast-path mode: the gateway
// host's listener gets it, the LAN device does not.
func TestHostAddrsLocal(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	s, err := twosite.Build(testenv.Topology(t, "chl"), twosite.Config{NoFastPath: true,
		AllowedA: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("2001:db8:2::/64")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc, f := s.FastConfig, compatFile(s)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, TunnelAddrs: []netip.Addr{twosite.TunnelA}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	const port = 9300 // udpFrame's
	bcast := netip.MustParseAddr("198.19.1.255")
	atHostA, atGwA := listenUDP4(t, s.HostA, port), listenUDP4(t, s.GwA, port)

	before := g.Stats().LAN
	testenv.SendUDP(t, s.HostB, netip.AddrPortFrom(bcast, port), 3)
	var pings string
	for _, dst := range []netip.Addr{twosite.LANA4, twosite.TunnelA} {
		out, _ := s.HostB.Run("ping", "-c", "2", "-W", "1", dst.String())
		pings += out
	}
	st := g.Stats().LAN
	testenv.PollUntil(5*time.Second, func() bool {
		st = g.Stats().LAN
		return st.Drops[tundev.PortDropLocal]-before.Drops[tundev.PortDropLocal] >= 7
	})
	if d := st.Drops[tundev.PortDropLocal] - before.Drops[tundev.PortDropLocal]; d != 7 {
		t.Errorf("3 datagrams to %v, 2 pings each to %v and %v from host B: %d local drops, want 7 (drops %v)", bcast, twosite.LANA4, twosite.TunnelA, d, st.Drops.List())
	}
	for _, r := range []tundev.PortDropReason{tundev.PortDropNoNeighbour, tundev.PortDropNoRoute} {
		if st.Drops[r] != before.Drops[r] {
			t.Errorf("%v: %d, was %d before", r, st.Drops[r], before.Drops[r])
		}
	}
	if st.ICMPErrors != before.ICMPErrors || strings.Contains(pings, "Unreachable") {
		t.Errorf("ICMP errors %d → %d; host B's pings:\n%s\nwant no error", before.ICMPErrors, st.ICMPErrors, pings)
	}
	if n := received(atHostA, 200*time.Millisecond); n != 0 {
		t.Errorf("host A received %d datagrams to %v, want none (Linux forwards no directed broadcast)", n, bcast)
	}
	neighs, err := s.GwA.Handle().NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range neighs {
		if a, _ := netip.AddrFromSlice(n.IP); a.Unmap() == bcast || a.Unmap() == twosite.LANA4 {
			t.Errorf("the gateway's kernel has a neighbour entry for %v (state %#x): a next hop was resolved for the host's own address", a, n.State)
		}
	}

	// From the LAN, in a frame to the gateway's MAC: the host's.
	gwMAC, err := s.GwA.LinkMAC(s.LANA)
	if err != nil {
		t.Fatal(err)
	}
	hostDev := onlyLink(t, s.HostA)
	hostMAC, err := s.HostA.LinkMAC(hostDev)
	if err != nil {
		t.Fatal(err)
	}
	rx := g.Stats().LAN.RXPackets
	testenv.SendFrames(t, s.HostA, hostDev, udpFrame(gwMAC, hostMAC, twosite.HostA4, bcast))
	if n := received(atGwA, time.Minute); n != 1 {
		t.Errorf("a LAN frame to the gateway's MAC for %v: the gateway host received %d datagrams, want 1", bcast, n)
	}
	if got := g.Stats().LAN.RXPackets; got != rx {
		t.Errorf("a LAN frame to the gateway's MAC for %v: the LAN device read %d packets, want none (the host's)", bcast, got-rx)
	}
}
