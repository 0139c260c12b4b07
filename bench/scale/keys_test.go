//go:build linux

package main

// wantKeys are the figures the smoke test requires in the result. Each
// part adds the keys its issue names when it lands.
var wantKeys = []string{"peers", "seconds"}
