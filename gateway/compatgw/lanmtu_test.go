//go:build linux

package compatgw

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestLANMTUFollowed: the LAN interface's MTU lowered on a running compat
// gateway (ip link set dev LAN mtu 1300) applies to the decrypted packets
// after it, as on a Linux router with wg0 and as in fast-path mode: host
// B's 1400-byte ping without DF reaches the LAN as fragments
// (fragmented), one with DF gets "fragmentation needed (mtu = 1300)"
// (too_big), and the change is logged. Before, compat mode held decrypted packets to
// the LAN MTU of its start (1500) and sent them whole. The LAN link set
// down and up is logged both ways (before, compat mode said nothing) and
// forwarding resumes.
func TestLANMTUFollowed(t *testing.T) {
	s, g, logs := loggedSite(t, "cmf", nil)
	before := g.Stats().LAN
	if out, err := s.GwA.Run("ip", "link", "set", "dev", s.LANA, "mtu", "1300"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Without DF first: host B keeps the MTU a "fragmentation needed"
	// tells it and would fragment itself after one. Host A's replies,
	// 1400 bytes, do not pass the 1300-byte veth back: the fragments are
	// seen in the gateway's count.
	st := g.Stats().LAN
	testenv.PollUntil(15*time.Second, func() bool {
		s.HostB.Run("ping", "-c", "1", "-W", "1", "-M", "dont", "-s", "1372", twosite.HostA4.String())
		st = g.Stats().LAN
		return st.Fragmented > before.Fragmented
	})
	if st.Fragmented == before.Fragmented {
		t.Errorf("1400-byte pings without DF from host B after the LAN MTU went to 1300: the LAN device fragmented none (stats %+v)", st)
	}
	var out string
	if !testenv.PollUntil(15*time.Second, func() bool {
		out, _ = s.HostB.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1372", twosite.HostA4.String())
		return strings.Contains(out, "mtu = 1300")
	}) {
		t.Errorf("1400-byte ping with DF from host B after the LAN MTU went to 1300:\n%s\nwant fragmentation needed (mtu = 1300); LAN stats %+v", out, g.Stats().LAN)
	}
	if st := g.Stats().LAN; st.Drops[tundev.PortDropTooBig] == before.Drops[tundev.PortDropTooBig] {
		t.Errorf("LAN device: too_big %d → %d, want it up", before.Drops[tundev.PortDropTooBig], st.Drops[tundev.PortDropTooBig])
	}
	if l := logs.String(); !strings.Contains(l, "LAN MTU changed") || !strings.Contains(l, "mtu=1300") {
		t.Errorf("log:\n%s\nwant the LAN MTU change to 1300", l)
	}
	// The LAN link set down and up again: both logged, as in fast-path
	// mode (what is lost while it is down, and the fix), and traffic
	// flows again after it.
	for _, c := range []struct{ state, want string }{{"down", "LAN link down"}, {"up", "LAN link up again"}} {
		if out, err := s.GwA.Run("ip", "link", "set", "dev", s.LANA, c.state); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !testenv.PollUntil(10*time.Second, func() bool { return strings.Contains(logs.String(), c.want) }) {
			t.Errorf("LAN link set %s: log:\n%s\nwant %q", c.state, logs.String(), c.want)
		}
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Errorf("after the LAN link went down and up: %v", err)
	}
}
