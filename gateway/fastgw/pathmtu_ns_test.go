//go:build linux

package fastgw_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestPathMTUIPv6Endpoint: with IPv6 endpoints and a link of MTU 1,400
// between the router and the stock peer (the gateways' WANs at 1,500, the
// tunnel MTU 1,420: 1,500-byte outer packets), the router answers the
// gateway's full-size outer packets with ICMPv6 "packet too big"; the
// gateway takes the path MTU from it and sends them as IPv6 fragments
// within 1,400 bytes, so full-size inner packets get through, both IPv4
// and IPv6 ones, as through Linux's WireGuard (which loses the packet the
// router answered, and fragments the next at the path MTU the kernel
// learnt). Before, every full-size packet toward the peer was dropped by
// the router, for good (100% loss of 1,420-byte pings).
func TestPathMTUIPv6Endpoint(t *testing.T) {
	testPathMTU(t, twosite.Config{Routed: true, Outer6: true})
}

// TestPathMTUIPv6EndpointOwned is TestPathMTUIPv6Endpoint in owned
// address mode, where the kernel has no WAN address and drops the
// router's "packet too big" (no ICMPv6 socket gets it): the gateway reads
// it with a packet socket on the WAN interface. Before, every full-size
// packet toward the peer was lost there, for good.
func TestPathMTUIPv6EndpointOwned(t *testing.T) {
	testPathMTU(t, twosite.Config{Routed: true, Outer6: true, Owned: true})
}

// TestPathMTUIPv6EndpointOwnedVLAN is TestPathMTUIPv6EndpointOwned with
// gwA's WAN on an 802.1Q VLAN (WANVLAN), the router's end an access port
// of it: the router's "packet too big" reaches the gateway tagged.
func TestPathMTUIPv6EndpointOwnedVLAN(t *testing.T) {
	testPathMTU(t, twosite.Config{Routed: true, Outer6: true, Owned: true, WANVLAN: 7})
}

func testPathMTU(t *testing.T, sc twosite.Config) {
	s := newSite(t, sc)
	if err := s.NarrowFarLink(1400); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0) // the handshake
	dsts := []netip.Addr{twosite.HostB4, twosite.HostB6}
	if sc.Owned {
		// The owned LANAddress is IPv4: host A has no IPv6 router.
		dsts = dsts[:1]
	}
	for _, dst := range dsts {
		// The first may be lost (the one the router answered), as
		// through Linux's WireGuard.
		if ok := twosite.FullSizePings(s.HostA, dst, 1420, 5); ok < 4 {
			t.Errorf("%d of 5 full-size pings to %v answered; drops %s; path MTUs %v", ok, dst, dropsString(s.Gateway), s.Gateway.Engine().PathMTUs())
		}
	}
	endB := netip.MustParseAddr("2001:db8:f2::2")
	if !testenv.PollUntil(time.Second, func() bool { return s.Gateway.Engine().PathMTUs()[endB] == 1400 }) {
		t.Errorf("path MTUs %v, want %v at 1400", s.Gateway.Engine().PathMTUs(), endB)
	}
	if st := s.Gateway.Engine().Stats()[0]; st.OuterFragmented == 0 {
		t.Errorf("no outer packet fragmented: %+v", st)
	}
}
