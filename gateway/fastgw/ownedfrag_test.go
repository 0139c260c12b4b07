//go:build linux

package fastgw_test

import (
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestOwnedFragmentedOuterPackets is TestFragmentedOuterPackets in the
// owned address mode: gwA's kernel has no address on the WAN, so it
// reassembles nothing for it; the stock peer's path to gwA has an MTU of
// 1300, so its kernel sends the full-size WireGuard datagrams as IP
// fragments (IPv4 without DF, as Linux's WireGuard sends them, or IPv6
// fragmented at the source). The XDP program redirects the fragments to
// the workers (xdp_redirect_fragment), which reassemble them (fastpath's
// Config.Reassemble): full-size pings and a TCP transfer arrive, the datagrams
// counted as reassembled. Before, every fragment went to the kernel and
// was lost.
func TestOwnedFragmentedOuterPackets(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, sc := range []struct {
		name string
		cfg  twosite.Config
		gwA  string // gwA's WAN address, as gwB reaches it
	}{
		{"ipv4", twosite.Config{Owned: true}, "198.18.1.1"},
		{"ipv6", twosite.Config{Owned: true, Outer6: true}, "2001:db8:f::1"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			s := newSite(t, sc.cfg)
			ping(t, s.HostB, "198.19.1.10", 0) // handshake first, unfragmented
			if out, err := s.GwB.Run("ip", "route", "replace", sc.gwA, "dev", s.WANB, "mtu", "lock", "1300"); err != nil {
				t.Fatalf("ip route replace %s mtu 1300: %v\n%s", sc.gwA, err, out)
			}
			stats := func() fastpath.ReassemblyStats {
				st, ok := s.Gateway.Engine().ReassemblyStats()
				if !ok {
					t.Fatal("the engine does not reassemble in owned mode")
				}
				return st
			}
			before := stats()
			ping(t, s.HostB, "198.19.1.10", 1392) // full-size inner packets
			tcpTransfer(t, s.HostB, s.HostA, twosite.HostA4, 4<<20)
			after := stats()
			if after.Reassembled == before.Reassembled {
				t.Errorf("no datagram reassembled: %+v; drops %s", after, dropsString(s.Gateway))
			}
			wan, _ := s.Gateway.Ports()
			if n := wan.Stats().Backend["xdp_redirect_fragment"]; n < 2*(after.Reassembled-before.Reassembled) {
				t.Errorf("xdp_redirect_fragment %d, want 2 per datagram reassembled at least (%d)", n, after.Reassembled-before.Reassembled)
			}
			var fromKernel uint64
			for _, q := range s.Gateway.Engine().Stats() {
				fromKernel += q.FromKernel
			}
			if fromKernel != 0 {
				t.Errorf("FromKernel %d in owned mode, want 0 (no kernel socket)", fromKernel)
			}
			t.Logf("reassembly: %d fragments, %d datagrams, drops %v; wgpio drops: %s", after.Fragments, after.Reassembled, after.Drops.List(), dropsString(s.Gateway))
		})
	}
}
