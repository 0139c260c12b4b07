//go:build linux

package main

func init() {
	wantKeys = append(wantKeys, "handshake_responses_per_s", "handshake_scaling_2_vs_1", "storm",
		"timer_lateness_p99_ms", "tick_cpu_share", "handshake_cpu")
}
