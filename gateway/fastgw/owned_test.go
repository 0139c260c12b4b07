//go:build linux

package fastgw_test

import (
	"fmt"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestOwnedAddressMode: gwA's kernel has no address on its WAN and LAN;
// wgpio answers ARP for 198.18.1.1 and 198.19.1.1 itself, resolves the LAN
// host and the WAN next hop itself, and carries traffic to and from the
// stock wireguard-go peer — on-link and through a router.
func TestOwnedAddressMode(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, routed := range []bool{false, true} {
		t.Run(fmt.Sprintf("routed=%v", routed), func(t *testing.T) {
			s := newSite(t, twosite.Config{Owned: true, Routed: routed})
			ping(t, s.HostA, twosite.HostB4.String(), 0)
			ping(t, s.HostB, twosite.HostA4.String(), 0)
			tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 2<<20)
			var nf uint64
			for _, q := range s.Gateway.Engine().Stats() {
				nf += q.NeighbourFrames
			}
			if nf == 0 {
				t.Error("no ARP frame reached wgpio's responder")
			}
			// The responders' counters are the gateway's (wgpio
			// stats, /metrics): the LAN host asked for the LAN
			// address, and the gateway for its next hops.
			n, ok := s.Gateway.Neighbours()
			if !ok || n["lan"].Replies == 0 || n["lan"].Requests+n["wan"].Requests == 0 {
				t.Errorf("Neighbours() = %+v, %v: want the LAN's replies and some requests", n, ok)
			}
			t.Logf("drops: %s; ARP/NDP frames handled: %d; neighbours %+v", dropsString(s.Gateway), nf, n)
		})
	}
}
