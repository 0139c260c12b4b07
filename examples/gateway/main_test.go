package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/demo"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// ping pings dst from ns until one answer comes, within timeout.
func ping(t *testing.T, ns *topo.NS, dst string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := ns.Run("ping", "-c", "1", "-W", "1", dst)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer in %v: %v", timeout, err)
		}
	}
}

// TestGatewayExample runs the example's configuration, from a command
// line, in the demo topology's gateway namespace against stock
// wireguard-go, and checks traffic both ways.
func TestGatewayExample(t *testing.T) {
	tp := testenv.Topology(t, "xg")
	s, err := demo.BuildSite(tp, demo.SiteConfig{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	stockBindInNS(t, s)
	fc := s.FastConfig
	key := filepath.Join(t.TempDir(), "private.key")
	if err := os.WriteFile(key, []byte(fc.PrivateKey.Base64()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, p := range fc.Peers[0].AllowedIPs {
		allowed = append(allowed, p.String())
	}
	cfg, err := parseConfig([]string{
		"-name", s.GwName, "-wan", s.WANA, "-lan", s.LANA, "-key", key,
		"-peer", fc.Peers[0].PublicKey.Base64(), "-endpoint", fc.Peers[0].Endpoint.String(),
		"-allowed", strings.Join(allowed, ","), "-address", fc.Addresses[0].String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(cfg)
		return err
	}); err != nil {
		t.Fatalf("fastgw.Start: %v", err)
	}
	defer g.Close()
	ping(t, s.HostA, demo.HostB4.String(), 15*time.Second)
	ping(t, s.HostB, demo.HostA4.String(), 5*time.Second)
	// The gateway's own tunnel address answers through the exception TUN.
	ping(t, s.HostB, demo.TunnelA.String(), 5*time.Second)
	if q := g.Engine().Stats()[0]; q.Encrypted == 0 || q.Decrypted == 0 {
		t.Errorf("queue 0 encrypted %d, decrypted %d; want both > 0", q.Encrypted, q.Decrypted)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-wan", "a", "-lan", "b", "-key", "/nonexistent", "-peer", "x", "-allowed", "10.0.0.0/8"},
	} {
		if _, err := parseConfig(args); err == nil {
			t.Errorf("parseConfig(%q) = nil error, want one", args)
		}
	}
}

// stockBindInNS makes sure the stock wireguard-go peer's UDP socket lives in
// gwB's namespace. internal/testing/wgpeer brings the peer's TUN up after
// device.Up; wireguard-go handles that TUN event (device/tun.go: EventUp →
// Device.Up → BindUpdate) on a goroutine whose OS thread may be in any
// namespace, so the socket is sometimes reopened outside gwB and the peer
// never answers. Reopen it from inside gwB until it stays there.
func stockBindInNS(t testing.TB, s *demo.Site) {
	t.Helper()
	listening := func() bool {
		out, err := s.GwB.Run("ss", "-Huln", "sport", "= :51820")
		return err == nil && strings.Contains(out, "51820")
	}
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		if listening() {
			time.Sleep(200 * time.Millisecond)
			if listening() {
				return
			}
		}
		if err := s.GwB.Do(s.Stock.Dev.BindUpdate); err != nil {
			t.Fatalf("reopen the stock peer's bind in %s: %v", s.GwB.Name, err)
		}
	}
	t.Fatalf("the stock peer's UDP socket is not in %s", s.GwB.Name)
}
