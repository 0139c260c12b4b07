//go:build linux

package main

import (
	"io"
	"testing"
	"time"
)

// TestMemoryPerPeer checks the targets at 1,000 peers: a configured
// peer without a session costs at most 4 KiB of Go heap, one with a live
// in-order session (a real handshake, then data in order) at most 8 KiB,
// everything of the gateway and the fast path included. The figures are
// averages over the peers after a collection, so they do not depend on
// timing.
func TestMemoryPerPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1,000 handshakes")
	}
	e := &env{Peers: 1000, Quick: true, Progress: io.Discard}
	if testing.Verbose() {
		e.Progress = testWriter{t}
	}
	out := map[string]any{}
	g, err := memoryPerPeer(e, e.Peers, out)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	t.Logf("per peer: idle %v B, session %v B, RSS %v B", out["idle_peer_bytes"], out["session_peer_bytes"], out["rss_per_peer_bytes"])
	if b := out["idle_peer_bytes"].(int64); b > 4096 {
		t.Errorf("idle_peer_bytes = %d, want at most 4096", b)
	}
	if b := out["session_peer_bytes"].(int64); b > 8192 {
		t.Errorf("session_peer_bytes = %d, want at most 8192", b)
	}
}

// TestSteadyRates: a pair is dropped whole when either burst took over
// interruptedBy times its pump's median, and the rates are over the rest.
func TestSteadyRates(t *testing.T) {
	us := time.Microsecond
	a := &pump{times: []time.Duration{10 * us, 10 * us, 10 * us, 100 * us, 10 * us}, got: []int32{64, 64, 64, 64, 64}}
	b := &pump{times: []time.Duration{20 * us, 20 * us, 200 * us, 20 * us, 20 * us}, got: []int32{64, 64, 64, 64, 64}}
	ra, rb, dropped := steadyRates(a, b)
	if dropped != 2 {
		t.Fatalf("dropped %d pairs, want 2 (pair 2: b over 4x its median, pair 3: a)", dropped)
	}
	if want := 3 * 64 / (30 * us).Seconds(); ra != want {
		t.Errorf("a's rate %.0f, want %.0f", ra, want)
	}
	if want := 3 * 64 / (60 * us).Seconds(); rb != want {
		t.Errorf("b's rate %.0f, want %.0f", rb, want)
	}
}
