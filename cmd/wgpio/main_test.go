//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// wgpioBin is the binary under test, built once in TestMain with
// CGO_ENABLED=0 (as `go install` from a clean clone builds it).
var wgpioBin string

func TestMain(m *testing.M) {
	if os.Getenv(hangingStartEnv) == "1" {
		hangingStart()
	}
	if name := os.Getenv(statsEMFILEEnv); name != "" {
		statsEMFILE(name)
	}
	dir, err := os.MkdirTemp("", "wgpio-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wgpioBin = filepath.Join(dir, "wgpio")
	build := exec.Command("go", "build", "-o", wgpioBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "CGO_ENABLED=0 go build ./cmd/wgpio: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// site is the two-site topology with gwA left to a `wgpio up` process.
type site struct {
	*twosite.Site
	tp   *topo.Topology
	dir  string // holds the config file
	conf string // config file path
	file *config.File
}

// newSite builds the topology (stock wireguard-go at gwB) and writes gwA's
// configuration file; edit adjusts the file before it is written.
func newSite(t *testing.T, edit func(f *config.File)) *site {
	t.Helper()
	return newSiteWith(t, twosite.Config{}, edit)
}

// newSiteWith is newSite on the topology variant tc (NoFastPath set).
func newSiteWith(t *testing.T, tc twosite.Config, edit func(f *config.File)) *site {
	t.Helper()
	testenv.Tool(t, "wg", "wireguard-tools")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "wc")
	tc.NoFastPath = true
	s, err := twosite.Build(tp, tc)
	if err != nil {
		t.Fatalf("twosite.Build: %v", err)
	}
	t.Cleanup(s.Close)
	if err := s.Stock.PinBind(); err != nil {
		t.Fatal(err)
	}
	fc := s.FastConfig
	f := &config.File{
		Interface: config.Interface{PrivateKey: fc.PrivateKey, ListenPort: fc.ListenPort, Addresses: fc.Addresses},
		WGPIO:     config.WGPIO{WAN: fc.WAN, LAN: fc.LAN},
	}
	for _, p := range fc.Peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs})
	}
	if edit != nil {
		edit(f)
	}
	st := &site{Site: s, tp: tp, dir: t.TempDir(), file: f}
	st.conf = filepath.Join(st.dir, s.GwName+".conf")
	if err := os.WriteFile(st.conf, f.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	return st
}

// gw is a running `wgpio up` process.
type gw struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (g *gw) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.Write(p)
}

func (g *gw) output() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.String()
}

func (g *gw) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// start runs cmd (a `wgpio up`) and kills it when the test ends.
func start(t *testing.T, cmd *exec.Cmd) *gw {
	t.Helper()
	g := &gw{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = g, g
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		if !g.exited() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-g.done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-g.done
			}
		}
		if t.Failed() {
			t.Logf("wgpio output:\n%s", g.output())
		}
	})
	return g
}

// waitUp waits until the gateway answers on its stats socket at statsPath.
func waitUp(t *testing.T, g *gw, statsPath string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if g.exited() {
			t.Fatalf("wgpio up exited: %v\n%s", g.err, g.output())
		}
		// Its own socket, which answers: one a killed run left behind
		// is there, refusing (ECONNREFUSED), before this run has set
		// up its signals.
		if c, err := net.Dial("unix", statsPath); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("wgpio up did not come up in 20 s:\n%s", g.output())
}

// up starts `wgpio up` as root in gwA.
func (s *site) up(t *testing.T, extra ...string) *gw {
	t.Helper()
	args := append([]string{"up", "-c", s.conf}, extra...)
	g := start(t, s.GwA.Command(wgpioBin, args...))
	waitUp(t, g, filepath.Join(runDir, s.GwName+".stats"))
	return g
}

// pingBoth checks traffic through the tunnel both ways.
func (s *site) pingBoth(t *testing.T) {
	t.Helper()
	// The first packet starts the handshake; allow one retry (Rekey-Timeout,
	// 5 s, whitepaper §6.4).
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, s.diagnose())
	}
	if err := s.HostB.Ping(twosite.HostA4, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// wg runs wg(8) with args in ns and returns its output.
func wg(t *testing.T, ns *topo.NS, args ...string) string {
	t.Helper()
	out, err := ns.Run("wg", args...)
	if err != nil {
		t.Fatalf("wg %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// xdpAttached reports whether ip(8) shows an XDP program on dev in ns.
func xdpAttached(t *testing.T, ns *topo.NS, dev string) bool {
	t.Helper()
	out, err := ns.Run("ip", "link", "show", "dev", dev)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(out, "xdp")
}

// diagnose describes the two gateways' state, for a failure message.
func (s *site) diagnose() string {
	var b strings.Builder
	st, _ := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
	fmt.Fprintf(&b, "wgpio stats:\n%s\n", st)
	for _, c := range []struct {
		ns   *topo.NS
		name string
		args []string
	}{
		{s.GwA, "wg", []string{"show", s.GwName}},
		{s.GwB, "wg", []string{"show", s.StockName}},
		{s.GwB, "ss", []string{"-uan"}},
		{s.GwB, "ip", []string{"-s", "link"}},
		{s.GwA, "ip", []string{"neigh"}},
	} {
		out, err := c.ns.Run(c.name, c.args...)
		fmt.Fprintf(&b, "%s %s in %s (%v):\n%s\n", c.name, strings.Join(c.args, " "), c.ns.Name, err, out)
	}
	return b.String()
}
