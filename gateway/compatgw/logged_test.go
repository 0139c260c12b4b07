//go:build linux

package compatgw

import (
	"log/slog"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// loggedSite builds a two-site topology named name (skipped in -short
// runs and without ping), runs before on it (nil: nothing), starts a
// compat gateway at site A whose log lines go to the returned buffer, and
// waits until host A reaches host B through it. The site and the gateway
// are closed at the test's end.
func loggedSite(t *testing.T, name string, before func(*twosite.Site)) (*twosite.Site, *Gateway, *testenv.LogBuffer) {
	t.Helper()
	return loggedSiteConfig(t, name, twosite.Config{}, before)
}

// loggedSiteConfig is loggedSite over a topology of sc (NoFastPath set
// here).
func loggedSiteConfig(t *testing.T, name string, sc twosite.Config, before func(*twosite.Site)) (*twosite.Site, *Gateway, *testenv.LogBuffer) {
	t.Helper()
	testenv.Short(t, "builds namespaces and runs two gateways")
	testenv.Tool(t, "ping", "iputils-ping")
	sc.NoFastPath = true
	s, err := twosite.Build(testenv.Topology(t, name), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if before != nil {
		before(s)
	}
	fc, f := s.FastConfig, compatFile(s)
	logs := new(testenv.LogBuffer)
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	return s, g, logs
}
