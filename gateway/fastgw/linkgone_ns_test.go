//go:build linux

package fastgw_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestLinkGoneFails: the LAN veth, the WAN veth or the exception TUN
// deleted while the gateway runs (ip link del) is its failure: Failed
// gives a *fastgw.GoneError naming the interface and its role, the
// deletion is logged at error level with what was on it and what happens,
// and Close then returns. Before, nothing was logged and the gateway ran
// on, dead, its sockets on an interface that no longer existed.
func TestLinkGoneFails(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway")
	for _, c := range []struct {
		name, what string
		// dev is the interface to delete, of the site's names.
		dev   func(lan, wan, tun string) string
		means string
	}{
		{"LAN", "LAN interface", func(lan, _, _ string) string { return lan }, "the gateway's LAN AF_XDP sockets and XDP program were on it"},
		{"WAN", "WAN interface", func(_, wan, _ string) string { return wan }, "the gateway's WAN AF_XDP sockets and XDP program were on it"},
		{"TUN", "exception TUN", func(_, _, tun string) string { return tun }, "the host's own traffic through the tunnel went through it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, g, logs := startLogged(t, "lg"+strings.ToLower(c.name[:1]))
			dev := c.dev(s.LANA, s.WANA, s.GwName)
			if out, err := s.GwA.Run("ip", "link", "del", "dev", dev); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var err error
			select {
			case err = <-g.Failed():
			case <-time.After(time.Minute):
				t.Fatalf("Failed gave nothing within a minute of ip link del %s\n%s", dev, logs.String())
			}
			var gone *fastgw.GoneError
			if !errors.As(err, &gone) || gone.Name != dev || gone.What != c.what {
				t.Fatalf("Failed: %v, want a GoneError for the %s %s", err, c.what, dev)
			}
			waitLogged(t, logs, "level=ERROR msg=\""+c.what+" "+dev+" was deleted (or moved to another network namespace): "+c.means, 1)
			if err := g.Close(); err != nil {
				t.Logf("Close after the deletion: %v", err)
			}
			select {
			case err := <-g.Failed():
				t.Errorf("Failed gave a second error: %v", err)
			default:
			}
		})
	}
}
