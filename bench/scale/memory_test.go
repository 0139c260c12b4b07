package main

import (
	"io"
	"testing"
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
