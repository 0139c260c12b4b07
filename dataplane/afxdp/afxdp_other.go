//go:build !linux

package afxdp

import (
	"errors"
	"runtime"
)

// Config configures a port (AF_XDP exists only on Linux).
type Config struct{}

// Port is unavailable on this system.
type Port struct{}

// Open returns an error: AF_XDP is Linux only.
func Open(ifname string, cfg Config) (*Port, error) {
	return nil, errors.New("afxdp: not implemented on " + runtime.GOOS)
}
