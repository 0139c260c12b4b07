//go:build linux

package fastgw_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestWANMTULoweredCounted: the WAN's MTU lowered under a running gateway
// (ip link set dev WAN mtu 1300) bounds what its port sends: host A's
// 1400-byte pings with DF, 1460-byte tunnel packets, are dropped and
// counted as the WAN port's too_long (the log's "tunnel packets are
// lost" says where). Before, the port kept the MTU of start and sent
// them whole, counted as transmitted only, in frames the link does not
// carry (here the veth's other end, of MTU 1500, took them). The MTU
// raised again lets them through.
func TestWANMTULoweredCounted(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Short(t, "builds namespaces and runs two gateways")
	s, g, logs := startLogged(t, "wml")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan, _ := g.Ports()
	mtu := func(want int) {
		t.Helper()
		runOK(t, s.GwA, "ip", "link", "set", "dev", s.WANA, "mtu", strconv.Itoa(want))
		// The change is logged once followed (netlink); a minute bounds
		// only its never coming.
		if !testenv.PollUntil(time.Minute, func() bool {
			return strings.Contains(logs.String(), "WAN MTU changed") && strings.Contains(logs.String(), "mtu="+strconv.Itoa(want)+" ")
		}) {
			t.Fatalf("WAN MTU set to %d: no change logged\n%s", want, logs.String())
		}
	}
	tooLong := func() uint64 { st := wan.Stats(); return st.Drops[dataplane.DropTooLong] }
	mtu(1300)
	before, tx := tooLong(), wan.Stats().TXPackets
	const n = 3
	out, _ := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "1", "-M", "do", "-s", "1372", twosite.HostB4.String())
	if got := tooLong() - before; got != n {
		t.Errorf("%d pings of 1400 bytes with DF over a WAN of MTU 1300: too_long %d at the WAN port (tx %d more), want %d\n%s",
			n, got, wan.Stats().TXPackets-tx, n, out)
	}
	mtu(1500)
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String()); err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("a 1400-byte ping with DF after the WAN MTU went back to 1500: %v\n%s", err, out)
	}
}
