//go:build linux

package main

func init() {
	wantKeys = append(wantKeys, "idle_peer_bytes", "session_peer_bytes", "rss_per_peer_bytes", "fastpath_100k_vs_1",
		"fastpath_100k_vs_1_steady", "fastpath_100k_vs_1_median", "fastpath_rate_interrupted", "fastpath_rate_lost")
}
