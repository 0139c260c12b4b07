//go:build linux

package fastgw_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestNoLANAddressWarned: a gateway in shared address mode whose LAN has
// no address (a user who took the gateway to own it) starts with a
// warning that names the interface, what fails and the fix; with its
// address, none. It started silently, and what the tunnel sent to the
// LAN's hosts was handed to the host ("to host") and went nowhere.
func TestNoLANAddressWarned(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs a gateway")
	s, err := twosite.Build(testenv.Topology(t, "nla"), twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const warning = "LAN has no IPv4 or global IPv6 address"
	start := func() string {
		t.Helper()
		logs := new(testenv.LogBuffer)
		fc := s.FastConfig
		fc.Logger = slog.New(slog.NewTextHandler(logs, nil))
		var g *fastgw.Gateway
		if err := s.GwA.Do(func() (err error) {
			g, err = fastgw.Start(fc)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		g.Close()
		return logs.String()
	}
	if got := start(); strings.Contains(got, warning) {
		t.Errorf("LAN %s with its address: logged %q:\n%s", s.LANA, warning, got)
	}
	if _, err := s.GwA.Run("ip", "address", "flush", "dev", s.LANA); err != nil {
		t.Fatal(err)
	}
	got := start()
	for _, want := range []string{warning, "no router address", "interface=" + s.LANA, `fix="ip addr add ADDRESS/PREFIX dev ` + s.LANA + `"`} {
		if !strings.Contains(got, want) {
			t.Errorf("LAN %s without an address: the log does not hold %q:\n%s", s.LANA, want, got)
		}
	}
}
