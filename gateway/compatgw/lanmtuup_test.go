//go:build linux

package compatgw

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestLANMTURaised: the LAN interface's MTU raised on a running compat
// gateway (1300 at start, then ip link set dev LAN mtu 1500) takes effect
// at once, as on a Linux router with wg0 and as a cut does: host B's
// 1400-byte ping with DF reaches host A whole and is answered, where
// before the LAN port kept the MTU of start (its frames of 1314 bytes at
// most) and the device answered "fragmentation needed (mtu = 1300)" until
// a restart. A raise past what an AF_XDP frame holds (3,822) is warned
// about, with the MTU held to, and the LAN port and device are held to
// it.
func TestLANMTURaised(t *testing.T) {
	setMTU := func(s *twosite.Site, mtu string) {
		t.Helper()
		if out, err := s.GwA.Run("ip", "link", "set", "dev", s.LANA, "mtu", mtu); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	s, g, logs := loggedSite(t, "cmr", func(s *twosite.Site) { setMTU(s, "1300") })
	setMTU(s, "1500")
	if !testenv.PollUntil(10*time.Second, func() bool { return g.LAN().LANMTU() == 1500 }) {
		t.Errorf("LAN MTU raised to 1500: the LAN device holds decrypted packets to %d; log:\n%s", g.LAN().LANMTU(), logs.String())
	}
	var out string
	if !testenv.PollUntil(15*time.Second, func() bool {
		out, _ = s.HostB.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1372", twosite.HostA4.String())
		return strings.Contains(out, " 0% packet loss")
	}) {
		t.Errorf("1400-byte ping with DF from host B after the LAN MTU went from 1300 to 1500:\n%s\nwant it answered; LAN stats %+v, port MTU %d", out, g.Stats().LAN, g.lan.MTU())
	}

	most := g.lan.MaxMTU()
	setMTU(s, "5000")
	testenv.PollUntil(10*time.Second, func() bool { return g.lan.MTU() == most && g.LAN().LANMTU() == most })
	if l := logs.String(); !strings.Contains(l, "above what an AF_XDP frame holds") || !strings.Contains(l, "held_to="+strconv.Itoa(most)) {
		t.Errorf("LAN MTU raised to 5000: log:\n%s\nwant a warning that a frame holds no more than MTU %d", l, most)
	}
	if g.lan.MTU() != most || g.LAN().LANMTU() != most {
		t.Errorf("LAN MTU raised to 5000: port MTU %d, device %d; want both held to %d", g.lan.MTU(), g.LAN().LANMTU(), most)
	}
}
