package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
)

// TestPrintStatsBacklog: `wgpio stats` prints the handshake backlog and its
// peak, as the README says it does (they were in -json and /metrics only).
func TestPrintStatsBacklog(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printStats("wg0", GatewayStats{Name: "wg0", Queues: make([]fastpath.QueueStats, 1),
		Device: gateway.Stats{HandshakeBacklog: 3, HandshakeBacklogPeak: 1024}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if want := "handshake backlog: 3 waiting, 1024 at most"; !strings.Contains(string(out), want) {
		t.Errorf("printStats does not say %q:\n%s", want, out)
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
