package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// TestNoEndpoint: a LAN host's packets to a road warrior that has not
// connected since the gateway started (a peer without endpoint) are
// dropped as no_endpoint and answered with host unreachable, as many as
// Linux's rate limits let through (6 of 20 pings sent at once), as
// Linux's wg0 and the fast path answer them; wireguard-go held them in
// the peer's staged queue, unanswered and uncounted. Once the road
// warrior connects, its traffic and the LAN's replies pass, and so do the
// LAN's own packets to it, though the gateway's periodic sync, which
// marks the peers without endpoint, is an hour away: the mark is checked
// against wireguard-go per packet.
func TestNoEndpoint(t *testing.T) {
	gwKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	peerKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + gwKey.Hex() + "\nlisten_port=51820\n" +
			"public_key=" + peerKey.PublicKey().Hex() + "\nallowed_ip=198.18.9.1/32\n"
	})
	rw := netip.MustParseAddr("198.18.9.1")
	before := s.g.Stats().LAN
	if got := testenv.Unreachables(t, s.host, rw.String(), "198.18.1.1", 20); got != 6 {
		t.Errorf("20 pings to %v (no endpoint): %d host unreachable, want 6 (Linux's burst)", rw, got)
	}
	st := s.g.Stats().LAN
	testenv.PollUntil(5*time.Second, func() bool {
		st = s.g.Stats().LAN
		return st.Drops[tundev.PortDropNoEndpoint]-before.Drops[tundev.PortDropNoEndpoint] >= 20
	})
	if d := st.Drops[tundev.PortDropNoEndpoint] - before.Drops[tundev.PortDropNoEndpoint]; d != 20 || st.ICMPErrors-before.ICMPErrors != 6 {
		t.Errorf("no_endpoint %d, icmp_errors %d; want 20 6 (LAN drops %v)", d, st.ICMPErrors-before.ICMPErrors, st.Drops.List())
	}

	peer, err := wgpeer.Start(s.peer, wgpeer.Config{
		Name: topo.UniqueName("wgne"), PrivateKey: peerKey, ListenPort: 51820,
		Address: netip.PrefixFrom(rw, 32), Routes: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: gwKey.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.0.1:51820"),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	mid := s.g.Stats().LAN
	if err := s.peer.Ping(netip.MustParseAddr("198.18.1.2"), 10*time.Second); err != nil {
		t.Fatalf("the road warrior, once connected, pings the LAN host: %v", err)
	}
	if err := s.host.Ping(rw, 10*time.Second); err != nil {
		t.Errorf("the LAN host pings the connected road warrior: %v", err)
	}
	if d := s.g.Stats().LAN.Drops[tundev.PortDropNoEndpoint] - mid.Drops[tundev.PortDropNoEndpoint]; d != 0 {
		t.Errorf("%d packets to the connected road warrior dropped as no_endpoint, want 0", d)
	}
}

// TestNoEndpointSetMoves: a wg set that gives an allowed IP inside the
// prefix of a peer without endpoint to a peer with one takes that
// address's packets to the other peer at once, though the sync that
// marked the first peer is an hour away: they are not dropped as
// no_endpoint (a set that changes allowed IPs turns the check off until
// the next sync).
func TestNoEndpointSetMoves(t *testing.T) {
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
			"public_key=" + strings.Repeat("22", 32) + "\nallowed_ip=198.18.9.0/24\n" +
			"public_key=" + strings.Repeat("33", 32) + "\nendpoint=198.18.0.2:51820\nallowed_ip=198.18.5.0/24\n"
	})
	noEndpoint := func() uint64 { return s.g.Stats().LAN.Drops[tundev.PortDropNoEndpoint] }
	if got := testenv.Unreachables(t, s.host, "198.18.9.1", "198.18.1.1", 3); got != 3 || !testenv.PollUntil(5*time.Second, func() bool { return noEndpoint() == 3 }) {
		t.Fatalf("3 pings to 198.18.9.1 (no endpoint): %d host unreachable, no_endpoint %d; want 3 3", got, noEndpoint())
	}
	if got := uapiSet(t, s.name, "public_key="+strings.Repeat("33", 32), "allowed_ip=198.18.9.1/32"); got != "errno=0" {
		t.Fatalf("set allowed_ip=198.18.9.1/32 on the peer with an endpoint: reply %q, want errno=0", got)
	}
	rx := s.g.Stats().LAN.RXPackets
	if got := testenv.Unreachables(t, s.host, "198.18.9.1", "198.18.1.1", 3); got != 0 {
		t.Errorf("3 pings to 198.18.9.1, now the allowed IP of a peer with an endpoint: %d host unreachable, want 0", got)
	}
	if !testenv.PollUntil(5*time.Second, func() bool { return s.g.Stats().LAN.RXPackets >= rx+3 }) || noEndpoint() != 3 {
		t.Errorf("after the set: %d packets read for wireguard-go, no_endpoint %d; want 3 more, no_endpoint 3", s.g.Stats().LAN.RXPackets-rx, noEndpoint())
	}
}
