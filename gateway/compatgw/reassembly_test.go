//go:build linux

package compatgw

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestFragmentedFromPeer: over a WAN link of MTU 1300 (both ends), the
// stock peer's kernel fragments its full-size outer datagrams (its
// socket lets it, as Linux's WireGuard's kernel does), the gateway's XDP
// program leaves the fragments to the kernel, which reassembles them for
// the gateway's kernel socket on the listen port (listenKernel), which
// hands them to the bind (bind.Bind.ReceiveKernel, counted as
// from_kernel): host A's 1400-byte pings with DF get their replies, over
// IPv4 and IPv6 outer packets, as through a Linux wg0. Before, the kernel
// had no socket on the port: it dropped the reassembled datagrams
// (UdpNoPorts) and every reply was lost. The sockets follow the listen
// port (wg set listen-port) and a WAN address added.
func TestFragmentedFromPeer(t *testing.T) {
	for _, outer6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "outer4", true: "outer6"}[outer6], func(t *testing.T) {
			testenv.Tool(t, "ss", "iproute2")
			s, g, logs := loggedSiteConfig(t, "cfr", twosite.Config{Outer6: outer6}, nil)
			for _, x := range []struct {
				ns  *topo.NS
				dev string
			}{{s.GwA, s.WANA}, {s.GwB, s.WANB}} {
				if out, err := x.ns.Run("ip", "link", "set", "dev", x.dev, "mtu", "1300"); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			// The bind fragments what it sends once it follows the MTU
			// (netlink; a minute bounds only its never coming).
			if !testenv.PollUntil(time.Minute, func() bool { return strings.Contains(logs.String(), "mtu=1300 ") }) {
				t.Fatalf("WAN MTU 1300 not followed:\n%s", logs.String())
			}
			pings := func(when string) {
				t.Helper()
				before := g.Stats().Bind
				const n = 3
				out, err := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String())
				after := g.Stats().Bind
				if err != nil || !strings.Contains(out, " 0% packet loss") {
					o, _ := s.GwA.Run("nstat", "-as")
					t.Fatalf("%s: %d pings of 1400 bytes with DF over a WAN of MTU 1300 (replies fragmented by the peer's kernel): %v\n%s\nbind %+v\n%s", when, n, err, out, after, o)
				}
				if got := after.FromKernel - before.FromKernel; got < n {
					t.Errorf("%s: bind from_kernel %d more, want %d at least (the fragmented replies)", when, got, n)
				}
				if got := after.RXPackets - before.RXPackets; got < after.FromKernel-before.FromKernel {
					t.Errorf("%s: bind rx_packets %d more, fewer than from_kernel %d", when, got, after.FromKernel-before.FromKernel)
				}
			}
			pings("at start")

			// listening reports whether the gateway's kernel has a UDP
			// socket bound to ap.
			listening := func(ap netip.AddrPort) bool {
				out, err := s.GwA.Run("ss", "-Hnlu")
				if err != nil {
					t.Fatalf("ss: %v\n%s", err, out)
				}
				for _, f := range strings.Fields(out) {
					if f == ap.String() {
						return true
					}
				}
				return false
			}
			wanA := netip.MustParseAddr("198.18.1.1")
			if outer6 {
				wanA = netip.MustParseAddr("2001:db8:f::1")
			}
			if !listening(netip.AddrPortFrom(wanA, 51820)) {
				t.Errorf("no kernel socket on %v", netip.AddrPortFrom(wanA, 51820))
			}
			// The peer follows the new port when it receives from it
			// (roaming): the pings' requests come from it.
			if got := uapiSet(t, s.GwName, "listen_port=51830"); got != "errno=0" {
				t.Fatalf("set listen_port=51830: reply %q, want errno=0", got)
			}
			if listening(netip.AddrPortFrom(wanA, 51820)) || !listening(netip.AddrPortFrom(wanA, 51830)) {
				o, _ := s.GwA.Run("ss", "-Hnlu")
				t.Errorf("after listen-port 51830: want a kernel socket on %v and none on 51820:\n%s", netip.AddrPortFrom(wanA, 51830), o)
			}
			pings("after listen-port 51830")

			// A WAN address added gets its socket; one removed loses it.
			added := netip.MustParseAddr("198.18.1.7")
			prefix := "/24"
			if outer6 {
				added, prefix = netip.MustParseAddr("2001:db8:f::7"), "/64"
			}
			if out, err := s.GwA.Run("ip", "addr", "add", added.String()+prefix, "dev", s.WANA, "nodad"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			ap := netip.AddrPortFrom(added, 51830)
			if !testenv.PollUntil(followWait, func() bool { return listening(ap) }) {
				t.Errorf("WAN address %v added: no kernel socket on %v in %v", added, ap, followWait)
			}
			if out, err := s.GwA.Run("ip", "addr", "del", added.String()+prefix, "dev", s.WANA); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !testenv.PollUntil(followWait, func() bool { return !listening(ap) }) {
				t.Errorf("WAN address %v removed: its kernel socket %v still open after %v", added, ap, followWait)
			}
		})
	}
}
