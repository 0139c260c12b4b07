//go:build linux

package srcaddr

import (
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// AppendBroadcasts appends to all the IPv4 directed broadcast addresses of
// addrs (an interface's, as netlink lists them) not in it yet: each
// address's own (ip address ... brd) and, for a prefix shorter than /31,
// its last address, for which Linux puts a broadcast route in its local
// table (fib_add_ifaddr); never 255.255.255.255. Linux delivers what is
// sent there locally, and forwards none of it (bc_forwarding 0): the
// gateways take them as the host's own addresses, so that such packets
// go to the kernel from the LAN (the XDP filter's host addresses) and,
// from the tunnel, to the exception TUN (fastgw), whose kernel delivers
// them likewise, or are dropped as the host's (compatgw, which has no way
// into the host), not sent to a neighbour that never answers.
func AppendBroadcasts(all []netip.Addr, addrs []netlink.Addr) []netip.Addr {
	add := func(ip net.IP) {
		if b, ok := netip.AddrFromSlice(ip.To4()); ok && b.Is4() && b != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && !slices.Contains(all, b) {
			all = append(all, b)
		}
	}
	for _, a := range addrs {
		if a.IPNet == nil || a.IP.To4() == nil {
			continue
		}
		if a.Broadcast != nil {
			add(a.Broadcast)
		}
		if ones, bits := a.Mask.Size(); bits == 32 && ones < 31 {
			b := make(net.IP, 4)
			for i, m := range a.Mask {
				b[i] = a.IP.To4()[i] | ^m
			}
			add(b)
		}
	}
	return all
}

// AppendAnycasts appends to all the IPv6 subnet-router anycast addresses
// (RFC 4291 §2.6.1: a prefix with an interface identifier of zeros) of
// addrs (an interface's, as netlink lists them) not in it yet: Linux
// joins one for each address's prefix while it forwards IPv6
// (addrconf_join_anycast), none for a /127 or a /128 (RFC 6164) nor
// for a prefix of zeros (::/n), and delivers what is sent there locally
// (an echo request is answered). The gateways, routers, take them as
// the host's own addresses as they take the directed broadcasts
// (AppendBroadcasts): from the tunnel they reach the host (fastgw: the
// exception TUN), not a LAN neighbour that never answers; from the LAN
// the host's kernel.
func AppendAnycasts(all []netip.Addr, addrs []netlink.Addr) []netip.Addr {
	for _, a := range addrs {
		if a.IPNet == nil || a.IP.To4() != nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP.To16())
		ones, bits := a.Mask.Size()
		if !ok || bits != 128 || ones >= 127 {
			continue
		}
		p, err := ip.Prefix(ones)
		if err != nil || p.Addr().IsUnspecified() || slices.Contains(all, p.Addr()) {
			continue
		}
		all = append(all, p.Addr())
	}
	return all
}
