//go:build linux

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
// follows the route. The peer is configured through the UAPI socket
// (ParseEndpoint, which asks nothing of the kernel itself) once a route
// toward it with `src` a second address (a keepalived virtual address)
// is there: the very first initiation leaves from that address, none
// from the WAN's first (the bind's default); the route's src removed:
// the first; added again: the second. Nothing answers (the peer's
// namespace runs no WireGuard), so the endpoint stays not heard from;
// captured in the peer's namespace.
func TestWANSourceOfRoute(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n"
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
	ip("addr", "add", "198.18.0.100/24", "dev", s.wanDev)
	ip("route", "add", "198.18.0.2/32", "dev", s.wanDev, "src", "198.18.0.100")
	if got := uapiSet(t, s.name, "public_key="+strings.Repeat("22", 32), "endpoint=198.18.0.2:51820",
		"persistent_keepalive_interval=1", "allowed_ip=198.18.9.0/24"); got != "errno=0" {
		t.Fatalf("set the peer: %s", got)
	}
	wait("198.18.0.100", 0, "configured, a route with src 198.18.0.100")
	if n := initiations("198.18.0.1"); n != 0 {
		t.Errorf("%d initiations from 198.18.0.1, want 0 (the route chooses 198.18.0.100)", n)
	}
	ip("route", "replace", "198.18.0.2/32", "dev", s.wanDev)
	wait("198.18.0.1", 0, "route without src")
	n := initiations("198.18.0.100")
	ip("route", "replace", "198.18.0.2/32", "dev", s.wanDev, "src", "198.18.0.100")
	wait("198.18.0.100", n, "route with src 198.18.0.100 again")
}
