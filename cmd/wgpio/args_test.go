package main

import (
	"strings"
	"testing"
)

// TestArgumentErrors: arguments a new user gets wrong are refused before
// anything is opened, each with a message that names the argument and the
// fix.
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		cmd  func([]string) error
		args []string
		want string
	}{
		{cmdUp, []string{"/etc/wgpio/wg0.conf"}, `up: unexpected argument "/etc/wgpio/wg0.conf" (the configuration file goes after -c: wgpio up -c /etc/wgpio/wg0.conf)`},
		{cmdUp, []string{"-c", "wg0.conf", "extra"}, `up: unexpected argument "extra" after the flags`},
		{cmdUp, []string{}, `up: -c FILE is required`},
		{cmdUp, []string{"-c", "wg0.conf", "-mode", "bogus"}, `up: -mode "bogus": want fastpath, compat or compat-mqtun`},
		{cmdUp, []string{"-c", "wg0.conf", "-xdp", "turbo"}, `up: -xdp "turbo": want auto, native or generic`},
		{cmdUp, []string{"-c", "wg0.conf", "-queues", "-2"}, `up: -queues -2: want 1 or more`},
		{cmdCapture, []string{}, `capture: a gateway NAME is required`},
		{cmdCapture, []string{"a", "b"}, `capture: one gateway NAME, got 2: a b`},
		{cmdCapture, []string{"-c", "-1", "wg0"}, `capture: -c -1: want 0 (until Ctrl-C) or a number of frames`},
		{cmdCapture, []string{"-s", "0", "wg0"}, `capture: -s 0: want the number of bytes kept`},
	} {
		err := tc.cmd(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	f, err := captureRequest{Port: "any", Dir: "any", Host: "notanip"}.filter()
	if err == nil || !strings.Contains(err.Error(), `host "notanip" is not an IP address`) {
		t.Errorf("filter(host notanip) = %+v, %v; want an error naming the host", f, err)
	}
}
