//go:build linux

package compatgw

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/device"
)

// Linux's wg0 holds the configuration's Address with its prefix length
// (wg-quick: ip address add 10.8.0.1/24 dev wg0), and so the route of its
// network, 10.8.0.0/24 dev wg0: a LAN host's packet to an address of that
// network that no peer's allowed IPs hold (a free address of a road
// warriors' pool) goes into wg0, where WireGuard answers it "host
// unreachable". Compat mode has no wg0; the host has no route for that
// network, and sent such a packet by its default route, out of the WAN,
// in cleartext. The LAN XDP filter now takes the tunnel's networks
// (Config.TunnelPrefixes) as it keeps a prefix that left the allowed IPs
// (prefixes.go): the PortDevice drops their packets no peer takes as
// no_route and answers them, and the allowed IPs inside them (the peers'
// /32s) match first and go on to wireguard-go.
//
// The tunnel addresses themselves are Linux's local addresses: a host
// that holds one at Start (ip addr add 10.8.0.1/32 dev lo, README) gets
// the LAN's packets to it (the LAN filter's host addresses, tunnelHeld);
// one it does not hold is the network's as any other address (compat
// mode has no way to hand a packet to the host).

// tunnelNets returns the networks of the tunnel prefixes ps (masked, each
// once). That of a single address (/32, /128) is the tunnel address
// alone: the host's if it holds it, else dropped and answered as the
// rest (Linux's wg0 delivers it locally; the host routed it by its other
// routes).
func tunnelNets(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		if p = p.Masked(); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// apart returns those of nets inside which routes (the host's main
// table, netlink.RouteList) has no route of its own, and logs each left
// out: a LAN or WAN subnet, a static route, that a tunnel network holds
// (Address = 198.18.0.1/16 over a WAN of 198.18.1.0/24) is more specific,
// and Linux's longest-prefix match sends its packets there, not into
// wg0; kept whole in the LAN filter the network took them to the
// PortDevice, which dropped them, and LAN hosts lost the WAN's subnet.
// Read at Start: a route added later inside a kept network is not seen.
func apart(log *slog.Logger, nets []netip.Prefix, routes []netlink.Route) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range nets {
		inside := netip.Prefix{}
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			ones, _ := r.Dst.Mask.Size()
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			if p := netip.PrefixFrom(a.Unmap(), ones); p.Bits() > n.Bits() && n.Contains(p.Addr()) {
				inside = p
				break
			}
		}
		if inside.IsValid() {
			log.Warn("the tunnel's network holds a route of the host's, more specific: its free addresses are not answered host unreachable, and the LAN's packets to them follow the host's routes (out of the WAN in cleartext where a default route leads there)", "network", n, "route", inside)
			continue
		}
		out = append(out, n)
	}
	return out
}

// heldAddrs returns those of addrs that routeGet (netlink.RouteGet in the
// gateway's namespace) says are the host's own: a route of type local.
// An address the lookup fails for is taken as not held.
func heldAddrs(routeGet func(net.IP) ([]netlink.Route, error), addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		rs, err := routeGet(a.Unmap().AsSlice())
		if err == nil && len(rs) > 0 && rs[0].Type == unix.RTN_LOCAL {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// tunnelAddrs are cfg's tunnel addresses: TunnelAddrs and those of
// TunnelPrefixes, each once.
func tunnelAddrs(cfg Config) []netip.Addr {
	var out []netip.Addr
	for _, a := range cfg.TunnelAddrs {
		if a = a.Unmap(); a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, p := range cfg.TunnelPrefixes {
		if a := p.Addr().Unmap(); a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// keepTunnelNets puts each tunnel network (g.tunnelNets) that no prefix
// in the LAN filter holds into it as a kept prefix (markKept: the
// PortDevice drops its packets that no allowed IP inside it takes), and
// reports whether it put one. A network that a configured prefix holds
// is that prefix's (wireguard-go sends to its peer, as Linux's wg0
// would); one for which the filter has no room waits for the next sync,
// the allowed IPs first. g.mu must be held; errors go to errs.
func (g *Gateway) keepTunnelNets(want map[netip.Prefix]device.NoisePublicKey, errs *prefixErrors) bool {
	changed := false
	for _, p := range g.tunnelNets {
		if g.prefixes[p] || covered(p, want) || covered(p, g.kept) {
			continue
		}
		f := family(p)
		if g.inFilter[f] >= g.capacity {
			continue
		}
		if err := g.filter.AddPrefix(p); err != nil {
			errs.add(fmt.Errorf("add the tunnel's network %v: %w", p, err))
			continue
		}
		g.prefixes[p] = true
		g.inFilter[f]++
		g.markKept(p)
		changed = true
	}
	return changed
}
