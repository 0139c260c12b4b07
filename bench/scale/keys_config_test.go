//go:build linux

package main

func init() {
	wantKeys = append(wantKeys, "uapi_set_100k_seconds", "uapi_get_100k_seconds", "startup_100k_seconds",
		"uapi_single_set_at_100k_ms", "uapi_single_set_at_100k_max_ms")
}
