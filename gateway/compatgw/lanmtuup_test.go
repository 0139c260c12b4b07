//go:build linux

package compatgw

import (
	"log/slog"
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
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	s, err := twosite.Build(testenv.Topology(t, "cmr"), twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	setMTU := func(mtu string) {
		t.Helper()
		if out, err := s.GwA.Run("ip", "link", "set", "dev", s.LANA, "mtu", mtu); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	setMTU("1300")
	fc, f := s.FastConfig, compatFile(s)
	var logs testenv.LogBuffer
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	setMTU("1500")
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
	setMTU("5000")
	testenv.PollUntil(10*time.Second, func() bool { return g.lan.MTU() == most && g.LAN().LANMTU() == most })
	if l := logs.String(); !strings.Contains(l, "above what an AF_XDP frame holds") || !strings.Contains(l, "held_to="+strconv.Itoa(most)) {
		t.Errorf("LAN MTU raised to 5000: log:\n%s\nwant a warning that a frame holds no more than MTU %d", l, most)
	}
	if g.lan.MTU() != most || g.LAN().LANMTU() != most {
		t.Errorf("LAN MTU raised to 5000: port MTU %d, device %d; want both held to %d", g.lan.MTU(), g.LAN().LANMTU(), most)
	}
}
