package compatgw

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestWANSourceOfRoute: wireguard-go on wgpio's bind sends to a
// configured endpoint it has not heard from (its handshake initiations,
// every Rekey-Timeout, 5 s, whitepaper §6.4) from the source the
// kernel's route toward it chooses, as Linux's WireGuard does, and
// follows the route: the WAN's first address; a route with `src` a
// second address (a keepalived virtual address) added: that address;
// the route's src removed: the first again. Nothing answers (the peer's
// namespace runs no WireGuard), so the endpoint stays not heard from;
// captured in the peer's namespace. (Before, the bind sent from the
// first address of the family whatever the route said.)
func TestWANSourceOfRoute(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
			"public_key=" + strings.Repeat("22", 32) + "\nendpoint=198.18.0.2:51820\npersistent_keepalive_interval=1\nallowed_ip=198.18.9.0/24\n"
	})
	capt := testenv.StartCapture(t, tcpdump, s.peer, "any", t.TempDir()+"/wan.pcap", "udp and dst port 51820")
	initiations := func(src string) int {
		out, _ := s.peer.Run(tcpdump, "-n", "-r", capt.File())
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " "+src+".51820 > 198.18.0.2.51820:") && strings.HasSuffix(l, "length 148") {
				n++
			}
		}
		return n
	}
	const retry = 12 * time.Second
	wait := func(src string, after int, what string) {
		t.Helper()
		if !testenv.PollUntil(retry, func() bool { return initiations(src) > after }) {
			t.Fatalf("%s: no handshake initiation from %s within %v (%d from 198.18.0.1, %d from 198.18.0.100)", what, src, retry,
				initiations("198.18.0.1"), initiations("198.18.0.100"))
		}
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := s.gw.Run("ip", args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	wait("198.18.0.1", 0, "at start")
	ip("addr", "add", "198.18.0.100/24", "dev", s.wanDev)
	ip("route", "add", "198.18.0.2/32", "dev", s.wanDev, "src", "198.18.0.100")
	wait("198.18.0.100", 0, "route with src 198.18.0.100")
	n := initiations("198.18.0.1")
	ip("route", "replace", "198.18.0.2/32", "dev", s.wanDev)
	wait("198.18.0.1", n, "route without src")
}
