//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/tundev"
)

// TestPrintStatsBacklog: `wgpio stats` prints the handshake backlog and its
// peak, as the README says it does (they were in -json and /metrics only).
func TestPrintStatsBacklog(t *testing.T) {
	out := capturePrintStats(t, GatewayStats{Name: "wg0", Queues: make([]fastpath.QueueStats, 1),
		Device: &gateway.Stats{HandshakeBacklog: 3, HandshakeBacklogPeak: 1024}})
	if want := "handshake backlog: 3 waiting, 1024 at most"; !strings.Contains(out, want) {
		t.Errorf("printStats does not say %q:\n%s", want, out)
	}
}

// TestPrintStatsKeepalives: `wgpio stats` says how many keepalives the
// gateway sent (the control plane's count) beside those it received (the
// queues' "keepalives in", summed), and the handshake messages it sent.
// Before, only the received ones were shown, per queue.
func TestPrintStatsKeepalives(t *testing.T) {
	q := make([]fastpath.QueueStats, 2)
	q[0].KeepalivesReceived, q[1].KeepalivesReceived = 4, 3
	out := capturePrintStats(t, GatewayStats{Name: "wg0", Queues: q,
		Device: &gateway.Stats{KeepalivesSent: 9, InitiationsSent: 2, ResponsesSent: 5, CookieRepliesSent: 1}})
	for _, want := range []string{
		"keepalives in",
		"keepalives: 9 sent, 7 received\n",
		"handshake messages sent: 2 initiations, 5 responses, 1 cookie replies\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printStats does not say %q:\n%s", want, out)
		}
	}
}

// TestPrintStatsForHost: `wgpio stats` shows, per queue, the decrypted
// packets to the host's own addresses ("for host", JSON exception) beside
// those it hands the kernel to forward ("to host"). Before, the first were
// in -json and /metrics only.
func TestPrintStatsForHost(t *testing.T) {
	q := make([]fastpath.QueueStats, 2)
	q[0].ToHost, q[0].Exception = 11, 23
	q[1].ToHost, q[1].Exception = 5, 7
	out := capturePrintStats(t, GatewayStats{Name: "wg0", Queues: q})
	lines := strings.Split(out, "\n")
	for len(lines) > 0 && !strings.HasPrefix(lines[0], "queue ") {
		lines = lines[1:]
	}
	if len(lines) < 3 {
		t.Fatalf("no queue table:\n%s", out)
	}
	head := strings.Split(lines[0], "  ")
	col := func(name string) int {
		n := 0
		for _, h := range head {
			if h = strings.TrimSpace(h); h == "" {
				continue
			}
			if h == name {
				return n
			}
			n++
		}
		t.Fatalf("no column %q in %q", name, lines[0])
		return -1
	}
	to, forHost := col("to host"), col("for host")
	for i, want := range [][2]string{{"11", "23"}, {"5", "7"}} {
		f := strings.Fields(lines[1+i])
		if f[to] != want[0] || f[forHost] != want[1] {
			t.Errorf("queue %d: to host %s, for host %s, want %s and %s:\n%s", i, f[to], f[forHost], want[0], want[1], out)
		}
	}
}

// capturePrintStats is what printStats prints for s.
func capturePrintStats(t *testing.T, s GatewayStats) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	printStats(s.Name, s)
	os.Stdout = stdout
	w.Close()
	out := <-done
	r.Close()
	return string(out)
}

// TestCompatStatsJSON: the stats of the compat modes leave out what they
// do not count (control_plane: stock wireguard-go keeps no counters of
// its handshakes and keepalives; exception_tun_drops: no exception TUN)
// instead of zeros that read as data, which the fast path's JSON keeps
// even when zero. Before, both compat modes served an all-zero
// control_plane. Their queues and peers are empty lists, [], as the fast
// path's when it has none; they were null.
func TestCompatStatsJSON(t *testing.T) {
	var exc uint64
	for _, tc := range []struct {
		name    string
		s       GatewayStats
		present bool
	}{
		{"compat", compatStats("wg0", config.ModeCompat, &CompatStats{}, nil, nil), false},
		{"compat-mqtun", compatStats("wg0", config.ModeCompatMQTUN, nil, &tundev.TUNStats{}, &UDPStats{}), false},
		{"fastpath", GatewayStats{Name: "wg0", Device: &gateway.Stats{}, ExceptionDrops: &exc}, true},
	} {
		b, err := json.Marshal(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"control_plane", "exception_tun_drops"} {
			if _, ok := m[k]; ok != tc.present {
				t.Errorf("%s: JSON has %q: %v, want %v:\n%s", tc.name, k, ok, tc.present, b)
			}
		}
		// compat carries its counters; compat-mqtun its TUN's and UDP
		// sockets' (stock wireguard-go counts nothing) and leaves
		// "compat" out, never "compat": null; the fast path has none of
		// them here (no exception TUN).
		if c, ok := m["compat"]; ok != (tc.name == "compat") || string(c) == "null" {
			t.Errorf("%s: JSON \"compat\" = %s (present %v):\n%s", tc.name, c, ok, b)
		}
		for _, k := range []string{"tun", "udp"} {
			if c, ok := m[k]; ok != (tc.name == "compat-mqtun") || string(c) == "null" {
				t.Errorf("%s: JSON %q = %s (present %v):\n%s", tc.name, k, c, ok, b)
			}
		}
		if tc.present {
			continue
		}
		// None of them: empty lists, as the fast path's, not null.
		for _, k := range []string{"queues", "peers"} {
			if got := string(m[k]); got != "[]" {
				t.Errorf("%s: JSON %q = %s, want []", tc.name, k, got)
			}
		}
	}
}

// TestPrintStatsXDPNone: a port whose XDP program has seen no frame yet
// says so; it printed "xdp lan: " and nothing after it.
func TestPrintStatsXDPNone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printStats("wg0", GatewayStats{Name: "wg0", Queues: make([]fastpath.QueueStats, 1),
		XDP: map[string]map[string]uint64{"lan": {"xdp_pass": 0}, "wan": {"xdp_redirect_udp": 2}}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	for _, want := range []string{"xdp lan: none yet\n", "xdp wan: xdp_redirect_udp=2\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("printStats does not say %q:\n%s", want, out)
		}
	}
}

// TestDialHintStaleSocket: a socket file nothing listens on (left by a
// gateway killed with SIGKILL) is named as such, with what to do; `wgpio
// stats` said "is `wgpio up` running?" of it, which does not say why a
// file is there or what to do about it.
func TestDialHintStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wg0.stats")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, as a killed gateway leaves it
	_, err = net.Dial("unix", path)
	if err == nil {
		t.Fatal("dial of a closed socket succeeded")
	}
	if got := dialHint(err, "is `wgpio up` running?"); !strings.Contains(got, "killed with SIGKILL") || !strings.Contains(got, "remove the file") {
		t.Errorf("dialHint(%v) = %q, want it to name a socket left by a killed gateway and what to do", err, got)
	}
}

// TestStatsOtherNames: `wgpio stats NAME` of a gateway that has no socket
// names the gateways that have one (a name mistyped) after "is `wgpio up`
// running?".
func TestStatsOtherNames(t *testing.T) {
	name := fmt.Sprintf("t%d", os.Getpid())
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		testenv.Missing(t, runDir+" ("+err.Error()+")", "run the test as root")
	}
	if _, err := os.Stat(filepath.Join(runDir, name+".stats")); err == nil {
		t.Fatalf("%s.stats exists already", name)
	}
	_, _, err := fetchStats(name + "x")
	if err == nil || !strings.Contains(err.Error(), "is `wgpio up` running?") {
		t.Fatalf("fetchStats of a name with no socket = %v, want the hint", err)
	}
	ln, err := net.Listen("unix", filepath.Join(runDir, name+".stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, _, err = fetchStats(name + "x")
	if err == nil || !strings.Contains(err.Error(), "the gateways here: ") || !strings.Contains(err.Error(), name) {
		t.Errorf("fetchStats(%sx) = %v, want it to name %s, the gateway here", name, err, name)
	}
}

// TestStatsStaleSocket: asked for every gateway, `wgpio stats` tells of a
// socket left by a gateway that ended (nothing listens on it) on stderr
// and fails only when no gateway answered; it failed whenever one such
// socket was there, though it printed the others (a gateway removed for
// good failed every later `wgpio stats`). Named, such a gateway is an
// error, and a name given twice is read once.
func TestStatsStaleSocket(t *testing.T) {
	name := fmt.Sprintf("s%d", os.Getpid())
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		testenv.Missing(t, runDir+" ("+err.Error()+")", "run the test as root")
	}
	path := filepath.Join(runDir, name+".stats")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nothing listens: stale
	t.Cleanup(func() { os.Remove(path) })
	var stderr strings.Builder
	err = printGateways([]string{name}, true, true, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no running wgpio gateway answered") {
		t.Errorf("all, only a stale socket: %v, want none answered", err)
	}
	if !strings.Contains(stderr.String(), "nothing listens on it") {
		t.Errorf("all: stderr %q, want the stale socket told of", stderr.String())
	}
	stderr.Reset()
	if err := printGateways([]string{name}, false, true, &stderr); err == nil || !strings.Contains(err.Error(), "nothing listens on it") {
		t.Errorf("named: %v, want the stale socket's error", err)
	}
}
