//go:build linux

package compatgw

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestLinkGoneFails: the LAN or the WAN veth deleted while the gateway
// runs (ip link del) is its failure: Failed gives a *GoneError
// naming the interface, the deletion is logged at error level with what
// was on it and what happens, and Close then returns. Before, nothing was
// logged and the gateway ran on, its ports on an interface that no
// longer existed.
func TestLinkGoneFails(t *testing.T) {
	for _, what := range []string{"LAN", "WAN"} {
		t.Run(what, func(t *testing.T) {
			var logs testenv.LogBuffer
			s := newSite(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			dev := s.lanDev
			if what == "WAN" {
				dev = s.wanDev
			}
			if out, err := s.gw.Run("ip", "link", "del", "dev", dev); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var err error
			select {
			case err = <-s.g.Failed():
			case <-time.After(time.Minute):
				t.Fatalf("Failed gave nothing within a minute of ip link del %s\n%s", dev, logs.String())
			}
			var gone *GoneError
			if !errors.As(err, &gone) || gone.Name != dev || gone.What != what+" interface" {
				t.Fatalf("Failed: %v, want a GoneError for the %s interface %s", err, what, dev)
			}
			want := "level=ERROR msg=\"" + what + " interface " + dev + " was deleted (or moved to another network namespace): the gateway's " + what + " AF_XDP sockets and XDP program were on it"
			if l := logs.String(); !strings.Contains(l, want) {
				t.Errorf("log:\n%s\nwant %q", l, want)
			}
			if err := s.g.Close(); err != nil {
				t.Logf("Close after the deletion: %v", err)
			}
		})
	}
}
