//go:build linux

package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRouteErrorIPv6Off: compat-mqtun's refused route of an IPv6 prefix
// into a TUN of an MTU below 1280 (ENODEV, the kernel's IPv6 off there)
// says why and what to change; before, "route ... into NAME: no such
// device" alone. Other errors, families and MTUs are told as they were.
func TestRouteErrorIPv6Off(t *testing.T) {
	p6, p4 := netip.MustParsePrefix("2001:db8:40::/64"), netip.MustParsePrefix("198.18.40.0/24")
	err := routeError(p6, "wgx", 1200, unix.ENODEV)
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "no IPv6 on a TUN of MTU 1200") || !strings.Contains(err.Error(), "raise MTU in [Interface] to 1280") {
		t.Errorf("IPv6, MTU 1200, ENODEV: %v", err)
	}
	for _, c := range []struct {
		p   netip.Prefix
		mtu int
		err error
	}{{p4, 1200, unix.ENODEV}, {p6, 1280, unix.ENODEV}, {p6, 0, unix.ENODEV}, {p6, 1200, unix.EPERM}} {
		err := routeError(c.p, "wgx", c.mtu, c.err)
		if want := "route " + c.p.String() + " into wgx: " + c.err.Error(); err.Error() != want || !errors.Is(err, c.err) {
			t.Errorf("%v, MTU %d, %v: %q, want %q", c.p, c.mtu, c.err, err, want)
		}
	}
}
