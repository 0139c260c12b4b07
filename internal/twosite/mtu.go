//go:build linux

package twosite

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/wgpio/wgpio/internal/topo"
)

// NarrowFarLink sets the MTU of the link between the router and gwB (gwB's
// WAN and the router's interface toward it) to mtu bytes, for the
// path-MTU tests: the router then answers larger outer IPv6 packets toward
// gwB with ICMPv6 "packet too big" (IPv6 routers do not fragment). Routed
// sites only.
func (s *Site) NarrowFarLink(mtu int) error {
	if s.Router == nil {
		return errors.New("twosite: NarrowFarLink needs a Routed site")
	}
	for _, l := range []struct {
		ns  *topo.NS
		dev string
	}{{s.GwB, s.WANB}, {s.Router, s.RouterB}} {
		if out, err := l.ns.Run("ip", "link", "set", l.dev, "mtu", fmt.Sprint(mtu)); err != nil {
			return fmt.Errorf("%s: ip link set %s mtu %d: %v\n%s", l.ns.Name, l.dev, mtu, err, out)
		}
	}
	return nil
}

// FullSizePings sends n pings from ns to dst, one at a time (1 s each at
// most), each an IP packet of exactly mtu bytes with DF set (IPv4) or
// unfragmentable by the sender (IPv6), and returns how many were
// answered.
func FullSizePings(ns *topo.NS, dst netip.Addr, mtu, n int) int {
	size := mtu - 28 // IPv4 and ICMP headers
	if dst.Is6() {
		size = mtu - 48
	}
	ok := 0
	for range n {
		if _, err := ns.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", fmt.Sprint(size), dst.String()); err == nil {
			ok++
		}
	}
	return ok
}
