//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// TestWANSecondaryAddress: WireGuard is taken at a further address of the
// WAN (a keepalived virtual address beside the first), as wireguard-go's
// wildcard sockets take it: a datagram to it reaches wireguard-go, the
// first address keeps working, and once the address is removed datagrams
// to it no longer do. (Only the first address of each family was taken:
// the kernel dropped the rest.) TestWANSecondaryAddressAnswered: the
// answers leave from it.
func TestWANSecondaryAddress(t *testing.T) {
	s := newSite(t)
	virt := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.100"), 51820)
	if err := s.gw.AddAddr(s.wanDev, "198.18.0.100/24"); err != nil {
		t.Fatal(err)
	}
	s.pinNeighbour(t, virt.Addr())
	if !s.reachesWGWithin(t, virt, followWait) {
		t.Fatalf("a datagram to the further WAN address %v did not reach wireguard-go", virt)
	}
	if !s.reachesWG(t, netip.MustParseAddrPort("198.18.0.1:51820")) {
		t.Error("a datagram to the first WAN address did not reach wireguard-go")
	}
	if out, err := s.gw.Run("ip", "addr", "del", "198.18.0.100/24", "dev", s.wanDev); err != nil {
		t.Fatalf("ip addr del: %v\n%s", err, out)
	}
	gone := false
	for end := time.Now().Add(followWait); !gone && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		gone = !s.reachesWG(t, virt)
	}
	if !gone {
		t.Errorf("after %v was removed, datagrams to it still reached wireguard-go", virt.Addr())
	}
	if !s.reachesWG(t, netip.MustParseAddrPort("198.18.0.1:51820")) {
		t.Error("after the removal, a datagram to the first WAN address did not reach wireguard-go")
	}
}

// TestWANSecondaryAddressAnswered: a stock wireguard-go peer that knows the
// compat gateway only by a further address of its WAN (the gateway has no
// endpoint for it) handshakes and pings the LAN host through it, and the
// gateway's stock wireguard-go answers from that address: the peer's
// endpoint for the gateway, which follows the source of what it
// authenticates, stays there. wireguard-go on wgpio's bind thus behaves as
// on its own bind, whose endpoints keep the address reached (IP_PKTINFO).
func TestWANSecondaryAddressAnswered(t *testing.T) {
	s, gwKey, peerKey := newKeyedSite(t)
	if err := s.gw.AddAddr(s.wanDev, "198.18.0.100/24"); err != nil {
		t.Fatal(err)
	}
	virt := netip.MustParseAddrPort("198.18.0.100:51820")
	if !s.reachesWGWithin(t, virt, followWait) {
		t.Fatalf("a datagram to the further WAN address %v did not reach wireguard-go", virt)
	}
	peer, err := wgpeer.Start(s.peer, wgpeer.Config{
		Name: topo.UniqueName("wgcp"), PrivateKey: peerKey, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.18.9.1/32"), Routes: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		Peers: []wgpeer.Peer{{
			PublicKey: gwKey.PublicKey(), Endpoint: virt,
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
	out, err := peer.Dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	if want := "endpoint=" + virt.String() + "\n"; !strings.Contains(out, want) {
		t.Errorf("the peer's endpoint for the gateway is not %v (the gateway answered from elsewhere):\n%s", virt, out)
	}
}

// newKeyedSite is a site whose gateway has a fresh key and one peer, of a
// fresh key too, without endpoint, routed 198.18.9.1/32: for tests that
// run the peer themselves.
func newKeyedSite(t *testing.T) (s *site, gwKey, peerKey noise.PrivateKey) {
	t.Helper()
	var err error
	if gwKey, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	if peerKey, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	s = newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + gwKey.Hex() + "\nlisten_port=51820\n" +
			"public_key=" + peerKey.PublicKey().Hex() + "\nallowed_ip=198.18.9.1/32\n"
	})
	return s, gwKey, peerKey
}
