//go:build linux

package main

func init() {
	wantKeys = append(wantKeys, "machine_load_ns_256kib", "machine_load_ns_8192kib", "machine_load_ns_65536kib", "machine_load_ns_65536kib_huge")
}
