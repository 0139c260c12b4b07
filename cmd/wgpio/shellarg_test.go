//go:build linux

package main

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/etc/wgpio/wg0.conf": "/etc/wgpio/wg0.conf",
		"h53a bad.conf":       "'h53a bad.conf'",
		"it's.conf":           `'it'\''s.conf'`,
		"":                    "''",
		"a$b":                 "'a$b'",
		"~x":                  "'~x'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
