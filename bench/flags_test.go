//go:build linux

package main

import "testing"

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"50000", 50000, true}, {"50k", 50e3, true}, {"1.5M", 1.5e6, true}, {" 2K ", 2e3, true},
		{"", 0, false}, {"-1k", 0, false}, {"fast", 0, false},
	} {
		got, err := parseRate(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("parseRate(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
