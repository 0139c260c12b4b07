//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	key := keyFile(t, fc.PrivateKey.Base64())
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

// TestHelp: -h prints the flags and exits 0, as a command asked for its
// help does; it added "gateway: flag: help requested" and exited 2.
func TestHelp(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-h")
	cmd.Env = append(os.Environ(), testenv.MainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("gateway -h: %v, want exit status 0:\n%s", err, out)
	}
	if !strings.Contains(string(out), "-wan") || strings.Contains(string(out), "help requested") {
		t.Errorf("gateway -h printed:\n%s\nwant the flags, and no error", out)
	}
}

// TestMain runs the example's main instead of the tests when
// testenv.MainEnv is set: TestStopsOnSignals runs the test binary so.
func TestMain(m *testing.M) { testenv.MainOrTests(m, main) }

// TestStopsOnSignals runs the example as a process in the gateway's
// namespace, as its doc runs it, and stops it with each signal that ends
// a program started from a shell: SIGINT (Ctrl-C), SIGTERM and SIGHUP (the
// terminal closed). Each time it prints its counters and exits 0, and its
// UAPI socket and exception TUN are gone. SIGHUP killed it, leaving a
// stale socket that `wg show` listed.
func TestStopsOnSignals(t *testing.T) {
	tp := testenv.Topology(t, "xs")
	s, err := twosite.Build(tp, twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc := s.FastConfig
	key := keyFile(t, fc.PrivateKey.Base64())
	sock := "/var/run/wireguard/" + s.GwName + ".sock"
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		cmd := s.GwA.Command(os.Args[0], "-name", s.GwName, "-wan", s.WANA, "-lan", s.LANA, "-key", key,
			"-peer", fc.Peers[0].PublicKey.Base64(), "-allowed", fc.Peers[0].AllowedIPs[0].String(),
			"-address", fc.Addresses[0].String())
		out, ok := testenv.StopWithSignal(t, cmd, func(out string) bool { return strings.Contains(out, "gateway up") }, sig)
		if !ok || !strings.Contains(out, "queue 0: encrypted") {
			t.Errorf("%v: the example did not print its counters and exit 0:\n%s", sig, out)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("%v: after the example exited, stat %s = %v, want not exist", sig, sock, err)
			os.Remove(sock)
		}
		if out, err := s.GwA.Run("ip", "link", "show", s.GwName); err == nil {
			t.Errorf("%v: the exception TUN %s is still there: %s", sig, s.GwName, out)
		}
	}
}

// keyFile writes key (base64) into a file of the test's, as the example's
// -key flag reads it, and returns its path.
func keyFile(t *testing.T, key string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "private.key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
