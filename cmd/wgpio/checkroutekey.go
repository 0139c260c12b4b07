//go:build linux

package main

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
)

// routeKeyWarnings are `wgpio check -system`'s warnings of the
// allowed-IPs prefixes whose route key (destination, TOS 0, metric 0 for
// IPv4 and 1024 for IPv6, as the gateway adds its routes) a route of the
// main table holds already, an interface's subnet or a static route: the
// start then keeps that route and makes none into the gateway's TUN, and
// warns of it (fastgw's markTaken), so the host's own packets to the
// prefix, and those its kernel forwards, take that route, not the tunnel;
// wg-quick up refuses such a prefix (File exists). In fast-path mode with
// an Address (the exception TUN) and in compat-mqtun (its TUN);
// 0.0.0.0/0 and ::/0, which the gateway routes nowhere, are left out, and
// so are the routes into the interface of the gateway's name: those of
// the gateway itself, running (its TUN's; they go with it), which every
// prefix of a running gateway's file was warned of (checkTUNName refuses
// an interface of that name that is not a running gateway's). A table
// that cannot be read gives none: the start reports it.
func routeKeyWarnings(f *config.File, w config.WGPIO, name string) []string {
	if !(w.Mode == config.ModeFastPath && len(f.Interface.Addresses) > 0 || w.Mode == config.ModeCompatMQTUN) {
		return nil
	}
	own := -1
	if l, err := netlink.LinkByName(name); err == nil {
		own = l.Attrs().Index
	}
	taken := make(map[netip.Prefix]bool)
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil
		}
		for _, r := range routes {
			if r.LinkIndex == own {
				continue
			}
			if p, ok := routeKey(r); ok {
				taken[p] = true
			}
		}
	}
	var out []string
	for _, p := range f.Peers {
		for _, a := range p.AllowedIPs {
			if a.Bits() == 0 || !taken[a.Masked()] {
				continue
			}
			err := &config.Error{File: f.Name, Line: p.Line, Key: "AllowedIPs", Msg: fmt.Sprintf(
				"%v is the key of a route of the host's (an interface's subnet, a static route: ip route show exact %v): that route stays and none is made into the gateway's TUN, so the host's own packets to it, and those its kernel forwards, take that route, not the tunnel (wg-quick up refuses such a prefix: File exists)", a, a)}
			out = append(out, err.Error())
		}
	}
	return out
}

// routeKey is r's key as the gateway's route of the same prefix would
// collide with it (EEXIST): a destination, TOS 0, and the metric the
// gateway adds its own with (0 for IPv4; IPv6's default, 1024).
func routeKey(r netlink.Route) (netip.Prefix, bool) {
	if r.Dst == nil || r.Tos != 0 {
		return netip.Prefix{}, false
	}
	p, ok := prefixOf(r.Dst)
	if !ok {
		return netip.Prefix{}, false
	}
	want := 0
	if p.Addr().Is6() {
		want = 1024
	}
	return p, r.Priority == want
}

// prefixOf is n as a masked netip.Prefix (an IPv4 one unmapped).
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	a = a.Unmap()
	if a.Is4() && bits > 32 {
		bits -= 96
	}
	return netip.PrefixFrom(a, bits).Masked(), true
}
