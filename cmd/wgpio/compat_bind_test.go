//go:build linux

package main

import (
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway/compatgw"
)

// TestCompatMSSClamp: the file's MSSClamp reaches compat mode's PortDevice.
func TestCompatMSSClamp(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{0, 0}, {config.MSSClampOff, 0}, {config.MSSClampAuto, compatgw.MSSClampAuto}, {1360, 1360},
	} {
		if got := compatMSSClamp(c.in); got != c.want {
			t.Errorf("compatMSSClamp(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
