package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestGatewayExample runs the example's configuration, from a command
// line, in the demo topology's gateway namespace against stock
// wireguard-go, and checks traffic both ways.
func TestGatewayExample(t *testing.T) {
	tp := testenv.Topology(t, "xg")
	testenv.Tool(t, "ping", "iputils-ping")
	s, err := twosite.Build(tp, twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Stock.PinBind(); err != nil {
		t.Fatal(err)
	}
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
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.HostB.Ping(twosite.HostA4, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The gateway's own tunnel address answers through the exception TUN.
	if err := s.HostB.Ping(twosite.TunnelA, 5*time.Second); err != nil {
		t.Fatal(err)
	}
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
