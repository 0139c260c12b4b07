//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestPathMTUIPv6Endpoint: compat mode with IPv6 endpoints and a link of
// MTU 1,400 between the router and the stock peer (the WANs at 1,500, the
// tunnel MTU 1,420: 1,500-byte outer datagrams). The router answers the
// bind's full-size datagrams with ICMPv6 "packet too big"; the gateway
// takes the path MTU from it and the bind sends them as IPv6 fragments
// within 1,400 bytes, so full-size inner packets get through, IPv4 and
// IPv6 ones, as through Linux's WireGuard (which loses the packet the
// router answered and fragments the next at the path MTU its kernel
// learnt). Before, every full-size packet toward the peer was dropped
// by the router, for good (100% loss of 1,420-byte pings).
func TestPathMTUIPv6Endpoint(t *testing.T) {
	s, g, logs := loggedSiteConfig(t, "cpm", twosite.Config{Routed: true, Outer6: true}, func(s *twosite.Site) {
		if err := s.NarrowFarLink(1400); err != nil {
			t.Fatal(err)
		}
	})
	endB := netip.MustParseAddr("2001:db8:f2::2")
	for _, dst := range []netip.Addr{twosite.HostB4, twosite.HostB6} {
		// The first may be lost (the one the router answered), as
		// through Linux's WireGuard.
		if ok := twosite.FullSizePings(s.HostA, dst, 1420, 5); ok < 4 {
			t.Errorf("%d of 5 full-size pings to %v answered; bind %+v; path MTUs %v", ok, dst, g.Stats().Bind, g.bind.PathMTUs())
		}
	}
	if !testenv.PollUntil(time.Second, func() bool { return g.bind.PathMTUs()[endB] == 1400 }) {
		t.Errorf("path MTUs %v, want %v at 1400", g.bind.PathMTUs(), endB)
	}
	if st := g.Stats().Bind; st.Fragmented == 0 {
		t.Errorf("no outer datagram fragmented: %+v", st)
	}
	if l := logs.String(); !strings.Contains(l, "path MTU toward an endpoint lowered") {
		t.Errorf("log:\n%s\nwant the path MTU lowered", l)
	}
}
