//go:build linux

package compatgw

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestTunnelNetworkNoCleartext: with Address = 198.19.77.1/24 (Config.
// TunnelPrefixes), a LAN host's packets to an address of 198.19.77.0/24
// that no peer holds reach the PortDevice (the LAN XDP filter keeps the
// network), which drops them as no_route and answers host unreachable,
// as Linux's wg0, which holds the network's route, answers them; the
// gateway host's default route toward the WAN router never carries them
// out in cleartext, as it did (the tunnel's network was in no filter).
// The tunnel address itself, which the host holds on lo, is still the
// host's: its echo requests are answered.
func TestTunnelNetworkNoCleartext(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	testenv.Tool(t, "ping", "iputils-ping")
	tunnelAddr := netip.MustParseAddr("198.19.77.1")
	s, g, wan := routedCompat(t, "ct", tcpdump, func(s *twosite.Site, cfg *Config) {
		if _, err := s.GwA.Run("ip", "addr", "add", tunnelAddr.String()+"/32", "dev", "lo"); err != nil {
			t.Fatal(err)
		}
		cfg.TunnelAddrs = []netip.Addr{tunnelAddr}
		// And one that holds the WAN's subnet (198.18.1.0/24): left
		// out, the WAN's hosts the LAN's as before.
		cfg.TunnelPrefixes = []netip.Prefix{netip.PrefixFrom(tunnelAddr, 24), netip.MustParsePrefix("198.18.0.1/16")}
	})
	if got := g.tunnelHeld; len(got) != 1 || got[0] != tunnelAddr {
		t.Errorf("tunnel addresses the host holds: %v, want [%v] (on lo)", got, tunnelAddr)
	}
	if got := g.tunnelNets; len(got) != 1 || got[0] != netip.MustParsePrefix("198.19.77.0/24") {
		t.Errorf("tunnel networks kept: %v, want [198.19.77.0/24] (198.18.0.0/16 holds the WAN's subnet)", got)
	}
	st := func() tundev.PortStats { return g.Stats().LAN }
	before := st()
	const n = 50
	testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(netip.MustParseAddr("198.19.77.9"), 9305), n)
	testenv.PollUntil(5*time.Second, func() bool { return st().Drops[tundev.PortDropNoRoute]-before.Drops[tundev.PortDropNoRoute] >= n })
	after := st()
	if got := after.Drops[tundev.PortDropNoRoute] - before.Drops[tundev.PortDropNoRoute]; got != n {
		t.Errorf("%d datagrams to the tunnel's network, %d counted as no_route; LAN: %d read, drops %v", n, got, after.RXPackets-before.RXPackets, after.Drops.List())
	}
	if after.ICMPErrors == before.ICMPErrors {
		t.Error("no host unreachable answered the datagrams to the tunnel's network")
	}
	// The tunnel address, the host's: answered by its kernel.
	if err := s.HostA.Ping(tunnelAddr, 5*time.Second); err != nil {
		t.Errorf("ping the tunnel address the host holds: %v", err)
	}
	// The peer's network still goes through the tunnel.
	if err := s.HostA.Ping(twosite.HostB4, 5*time.Second); err != nil {
		t.Errorf("ping through the tunnel: %v", err)
	}
	frames, leaks := wanLeaks(t, wan)
	if frames == 0 {
		t.Error("the WAN capture holds no frame, not even the tunnel's: the leak check saw nothing")
	}
	if len(leaks) > 0 {
		t.Errorf("%d of the %d frames on the WAN carry an inner address (cleartext); the first: %s", len(leaks), frames, leaks[0])
	}
}
