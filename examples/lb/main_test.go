//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestBalancer runs the balancer in the demo topology's gateway namespace
// (its WAN only) with stock wireguard-go as the peer, and sends requests to
// the VIP from the host behind the peer, from several source ports.
func TestBalancer(t *testing.T) {
	tp := testenv.Topology(t, "xl")
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
	var b *Balancer
	if err := s.GwA.Do(func() (err error) {
		b, err = Start(Config{
			Name: s.GwName, WAN: s.WANA, ListenPort: fc.ListenPort, PrivateKey: fc.PrivateKey,
			Peers: fc.Peers, VIP: twosite.TunnelA, ServicePort: 7, Backends: 4,
		})
		return err
	}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer b.Close()

	// The first request starts the handshake (gwB initiates); retry until
	// one answer comes, then every request is answered.
	const clients = 16
	var conns []*net.UDPConn
	if err := s.HostB.Do(func() error {
		for i := 0; i < clients; i++ {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: twosite.TunnelA.AsSlice(), Port: 7})
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ask := func(c *net.UDPConn, msg string, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := ask(conns[0], "hello", time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no answer from the VIP in 15 s: %v", err)
		}
	}
	backends := map[string]bool{}
	for i, c := range conns {
		msg := fmt.Sprintf("request %d", i)
		got, err := ask(c, msg, 2*time.Second)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		var k int
		if _, err := fmt.Sscanf(got, "backend %d: ", &k); err != nil || !strings.HasSuffix(got, ": "+msg) || k < 0 || k >= 4 {
			t.Errorf("client %d: answer %q, want \"backend K: %s\" with K in 0-3", i, got, msg)
		}
		// A flow always goes to the same backend.
		again, err := ask(c, msg, 2*time.Second)
		if err != nil || again != got {
			t.Errorf("client %d asked twice: %q then %q (%v), want the same backend", i, got, again, err)
		}
		backends[got[:len("backend 0")]] = true
	}
	if len(backends) < 2 {
		t.Errorf("%d clients reached %d backends, want the flows spread over several", clients, len(backends))
	}
	if _, err := s.HostB.Run("ping", "-c", "1", "-W", "2", twosite.TunnelA.String()); err != nil {
		t.Errorf("ping the VIP: %v", err)
	}
	t.Logf("served per backend: %v", b.Served())
}

// TestMain runs the example's main instead of the tests when
// testenv.MainEnv is set: TestStopsOnHangup runs the test binary so.
func TestMain(m *testing.M) { testenv.MainOrTests(m, main) }

// TestStopsOnHangup runs the balancer as a process, as its doc runs it,
// and closes its terminal (SIGHUP): it prints what it served, exits 0 and
// removes its UAPI socket. SIGHUP killed it, leaving the socket behind.
func TestStopsOnHangup(t *testing.T) {
	tp := testenv.Topology(t, "xh")
	s, err := twosite.Build(tp, twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc := s.FastConfig
	key := filepath.Join(t.TempDir(), "private.key")
	if err := os.WriteFile(key, []byte(fc.PrivateKey.Base64()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "/var/run/wireguard/" + s.GwName + ".sock"
	cmd := s.GwA.Command(os.Args[0], "-name", s.GwName, "-wan", s.WANA, "-key", key,
		"-vip", twosite.TunnelA.String(), "-peer", fc.Peers[0].PublicKey.Base64(),
		"-allowed", fc.Peers[0].AllowedIPs[0].String())
	up := func(string) bool { _, err := os.Stat(sock); return err == nil }
	out, ok := testenv.StopWithSignal(t, cmd, up, syscall.SIGHUP)
	if !ok || !strings.Contains(out, "requests served per backend") {
		t.Errorf("the balancer did not print what it served and exit 0:\n%s", out)
	}
	// It says it is up, and what it dropped: a peer whose requests went
	// unanswered (a session of an earlier run: unknown_index) left the
	// user with nothing to go on.
	for _, want := range []string{`msg="balancer up"`, "dropped: "} {
		if !strings.Contains(out, want) {
			t.Errorf("the balancer's output has no %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("after the balancer exited, stat %s = %v, want not exist", sock, err)
		os.Remove(sock)
	}
}
