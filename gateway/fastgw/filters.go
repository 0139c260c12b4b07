//go:build linux

package fastgw

// The XDP filters of the two ports (afxdp.Filter) and the host addresses
// the LAN's leaves to the kernel.

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// wanFilter is the WAN XDP filter: UDP to our addresses (the defaults v4
// and v6, the further ones: wanaddrs.go) on the listen port and the source
// ports above it, and (owned mode) ARP/NDP for our address, the
// neighbours' announcements (gratuitous ARP, unsolicited NA: their
// entries updated, arp.Table.Update) and the UDP fragments to it, which the engine reassembles (fastpath's
// Config.Reassemble: the kernel has no address to reassemble them for).
func wanFilter(c Config, v4, v6 netip.Addr, vid uint16, others ...netip.Addr) afxdp.Filter {
	f := afxdp.Filter{VLAN: vid}
	for _, a := range append([]netip.Addr{v4, v6}, others...) {
		if a.IsValid() {
			f.UDP = append(f.UDP, afxdp.UDPMatch{Addr: a, PortLo: c.ListenPort, PortHi: c.ListenPort + c.SourcePorts - 1})
		}
	}
	if c.Owned {
		f.Neighbours = []netip.Addr{c.WANAddress.Addr()}
		f.NeighbourUpdates = true
		f.Fragments = true
		f.MLDQueries = vid != 0 && c.WANAddress.Addr().Is6() // answered by arp.MLDHost (ownedMode)
	}
	return f
}

// lanFilter is the LAN XDP filter: destinations in the allowed IPs (a prefix
// map filled by dataplane_.UpdatePeers) that are not the host's own addresses
// (host, from lanHostAddrs), and (owned mode) ARP/NDP for ours and the
// neighbours' announcements.
func lanFilter(c Config, host []netip.Addr, vid uint16) afxdp.Filter {
	f := afxdp.Filter{Prefixes: true, PrefixCapacity: cmp.Or(c.LANPrefixCapacity, defaultLANPrefixCapacity), VLAN: vid, HostAddrs: host}
	if c.Owned {
		f.Neighbours = []netip.Addr{c.LANAddress.Addr()}
		f.NeighbourUpdates = true
		f.MLDQueries = vid != 0 && c.LANAddress.Addr().Is6()
	}
	return f
}

// lanHostAddrs are the addresses the LAN XDP filter gives to the host
// rather than the tunnel: the tunnel addresses (c.Addresses) first, then
// the LAN interface's (lanAddrs, in netlink's order: IPv4's primary
// first), then the WAN interface's (wanAddrs: a LAN host's SSH to the
// gateway's WAN address, which went into the tunnel of a peer with
// AllowedIPs = 0.0.0.0/0), each once, at most afxdp.MaxHostAddrs of each
// family. left are those of lanAddrs and wanAddrs past that limit, in
// order: at start as at run time the gateway runs without them and says
// so (warnHostAddrsLeft), since a failure would take down the tunnel for
// addresses that matter only when a peer's allowed IPs hold them.
func lanHostAddrs(c Config, lanAddrs, wanAddrs []netip.Addr) (host, left []netip.Addr) {
	seen := make(map[netip.Addr]bool, len(c.Addresses)+len(lanAddrs)+len(wanAddrs))
	var n4, n6 int
	add := func(a netip.Addr) bool {
		if a = a.Unmap(); seen[a] {
			return true
		}
		n := &n6
		if a.Is4() {
			n = &n4
		}
		if *n == afxdp.MaxHostAddrs {
			return false
		}
		seen[a] = true
		*n++
		host = append(host, a)
		return true
	}
	for _, p := range c.Addresses {
		add(p.Addr())
	}
	for _, a := range slices.Concat(lanAddrs, wanAddrs) {
		if !add(a) {
			left = append(left, a)
		}
	}
	return host, left
}

// warnHostAddrsLeft logs the LAN addresses the LAN XDP filter could not
// hold (lanHostAddrs), when they differ from those of the previous call
// (g.lanLeft, on the caller's goroutine: Start's, then followAddresses').
func (g *Gateway) warnHostAddrsLeft(left []netip.Addr) {
	if slices.Equal(left, g.lanLeft) {
		return
	}
	g.lanLeft = left
	if len(left) == 0 {
		g.log.Info("the LAN XDP filter holds all the LAN and WAN interfaces' addresses again", "lan", g.lanName, "wan", g.wanName)
		return
	}
	g.log.Warn("the LAN and WAN interfaces have more addresses than the LAN XDP filter holds: frames from LAN hosts to those left out are forwarded as to any other destination (into the tunnel when a peer's allowed IPs hold them), not delivered to this host",
		"lan", g.lanName, "wan", g.wanName, "limit", afxdp.MaxHostAddrs, "per", "family", "left_out", len(left), "addresses", left)
}
