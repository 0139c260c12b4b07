//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
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
	s, gwKey, peerKey := newKeyedSite(t)
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

// TestNoEndpointSetMoves: an address that moves from a peer without
// endpoint (A) to one with one (B) is never dropped as no_endpoint once
// wireguard-go routes it to B: after a wg set that gives B a prefix inside
// A's, or A's whole prefix (a move, which changes no prefix of the LAN
// filter), at once though the periodic sync is an hour away; and after a
// move through the Go API (Device().IpcSet, unseen by the sets), from the
// next sync on (called here), though A keeps another prefix and so stays
// a peer without endpoint.
func TestNoEndpointSetMoves(t *testing.T) {
	a, b := strings.Repeat("22", 32), strings.Repeat("33", 32)
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
			"public_key=" + a + "\nallowed_ip=198.18.9.0/24\nallowed_ip=198.18.5.0/24\nallowed_ip=198.18.7.0/24\n" +
			"public_key=" + b + "\nendpoint=198.18.0.2:51820\nallowed_ip=198.18.6.0/24\n"
	})
	noEndpoint := func() uint64 { return s.g.Stats().LAN.Drops[tundev.PortDropNoEndpoint] }
	// pings sends 3 pings to dst and waits until the LAN device read or
	// dropped them as no_endpoint; it returns how many it dropped so.
	pings := func(dst string) uint64 {
		t.Helper()
		st := s.g.Stats().LAN
		ne := st.Drops[tundev.PortDropNoEndpoint]
		testenv.Unreachables(t, s.host, dst, "198.18.1.1", 3)
		if !testenv.PollUntil(5*time.Second, func() bool {
			now := s.g.Stats().LAN
			return now.RXPackets-st.RXPackets+now.Drops[tundev.PortDropNoEndpoint]-ne >= 3
		}) {
			t.Fatalf("3 pings to %s: neither read nor dropped as no_endpoint", dst)
		}
		return noEndpoint() - ne
	}
	set := func(lines ...string) {
		t.Helper()
		if got := uapiSet(t, s.name, lines...); got != "errno=0" {
			t.Fatalf("set %q: reply %q, want errno=0", lines, got)
		}
	}
	sync := func() {
		t.Helper()
		if err := s.g.syncPrefixes(); err != nil {
			t.Fatal(err)
		}
	}
	if got := pings("198.18.9.1"); got != 3 {
		t.Fatalf("3 pings to 198.18.9.1 (peer A, no endpoint): %d dropped as no_endpoint, want 3", got)
	}
	set("public_key="+b, "allowed_ip=198.18.9.1/32")
	if got := pings("198.18.9.1"); got != 0 {
		t.Errorf("after wg set gave 198.18.9.1/32 to peer B: %d of 3 pings dropped as no_endpoint, want 0", got)
	}
	sync()
	set("public_key="+b, "allowed_ip=198.18.9.0/24")
	if got := pings("198.18.9.2"); got != 0 {
		t.Errorf("after wg set moved 198.18.9.0/24 to peer B: %d of 3 pings dropped as no_endpoint, want 0", got)
	}
	sync()
	if got := pings("198.18.5.1"); got != 3 {
		t.Fatalf("3 pings to 198.18.5.1 (peer A): %d dropped as no_endpoint, want 3", got)
	}
	if err := s.g.Device().IpcSet("public_key=" + b + "\nallowed_ip=198.18.5.0/24\n"); err != nil {
		t.Fatal(err)
	}
	sync()
	if got := pings("198.18.5.1"); got != 0 {
		t.Errorf("after the Go API moved 198.18.5.0/24 to peer B and a sync: %d of 3 pings dropped as no_endpoint, want 0", got)
	}
}

// TestOwnersSum: the digest of the allowed IPs is the same for the same
// prefixes and peers however the map was built, and differs when a
// prefix moves to another peer, leaves, or comes back as the same
// address of the other family's form.
func TestOwnersSum(t *testing.T) {
	p := netip.MustParsePrefix
	var a, b device.NoisePublicKey
	a[0], b[0] = 1, 2
	base := map[netip.Prefix]device.NoisePublicKey{p("198.18.9.0/24"): a, p("198.18.5.0/24"): a, p("2001:2::/48"): b}
	same := map[netip.Prefix]device.NoisePublicKey{p("2001:2::/48"): b, p("198.18.5.0/24"): a}
	same[p("198.18.9.0/24")] = a
	if ownersSum(base) != ownersSum(same) {
		t.Error("ownersSum differs for the same allowed IPs built in another order")
	}
	for name, m := range map[string]map[netip.Prefix]device.NoisePublicKey{
		"moved":  {p("198.18.9.0/24"): b, p("198.18.5.0/24"): a, p("2001:2::/48"): b},
		"left":   {p("198.18.5.0/24"): a, p("2001:2::/48"): b},
		"mapped": {p("::ffff:198.18.9.0/24"): a, p("198.18.5.0/24"): a, p("2001:2::/48"): b},
	} {
		if ownersSum(m) == ownersSum(base) {
			t.Errorf("%s: ownersSum = that of the allowed IPs before", name)
		}
	}
}
