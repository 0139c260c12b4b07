//go:build linux

package srcaddr

import (
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Use is how an IPv6 address may be used as a source.
type Use int

const (
	Preferred  Use = iota // use it
	Deprecated            // use it when no Preferred address exists
	Unusable              // tentative or failed duplicate address detection
)

// IPv6 judges an IPv6 address by its IFA_F_* flags (netlink.Addr.Flags).
// When a tentative address's detection ends, the kernel announces it
// again (RTM_NEWADDR), and an address follower reads it then.
func IPv6(flags int) Use {
	switch {
	case flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0:
		return Unusable
	case flags&unix.IFA_F_DEPRECATED != 0:
		return Deprecated
	}
	return Preferred
}

// Choose reads an interface's addresses as netlink lists them: v4 is the
// first IPv4 address; v6 the first IPv6 one, not link-local, that IPv6
// judges Preferred, else the first Deprecated one, else none; all holds
// every address (an IPv4-mapped one as IPv4). The gateways send from v4
// and v6, and take all as the host's own.
func Choose(addrs []netlink.Addr) (v4, v6 netip.Addr, all []netip.Addr) {
	var deprecated netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		all = append(all, ip)
		switch {
		case ip.Is4() && !v4.IsValid():
			v4 = ip
		case ip.Is6() && !ip.IsLinkLocalUnicast() && !v6.IsValid():
			switch IPv6(a.Flags) {
			case Preferred:
				v6 = ip
			case Deprecated:
				if !deprecated.IsValid() {
					deprecated = ip
				}
			}
		}
	}
	if !v6.IsValid() {
		v6 = deprecated
	}
	return v4, v6, all
}

// Subnets lists an interface's addresses, with their prefix lengths, that
// a gateway may send ICMP errors from, as netlink lists them: every IPv4
// one, and the IPv6 ones, not link-local, that IPv6 judges Preferred.
// (fastpath.Engine.SetLANSubnets picks one per destination.)
func Subnets(addrs []netlink.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range addrs {
		p, ok := Prefix(a)
		if ip := p.Addr(); ok && (ip.Is4() || !ip.IsLinkLocalUnicast() && IPv6(a.Flags) == Preferred) {
			out = append(out, p)
		}
	}
	return out
}

// Prefix returns the address a with the length of its prefix (an
// IPv4-mapped one as IPv4); false for a without an address.
func Prefix(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// LinkLocal returns an interface's IPv6 link-local address (fe80::/10) as
// netlink lists them: the first that IPv6 judges Preferred, else the
// first Deprecated one, else none. The gateways send from it the ICMPv6
// errors to a link-local address on that interface, as Linux's source
// address selection picks an address of the destination's scope on the
// interface the error leaves by (RFC 6724 §5 rule 2).
func LinkLocal(addrs []netlink.Addr) netip.Addr {
	var deprecated netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !ip.Is6() || ip.Is4In6() || !ip.IsLinkLocalUnicast() {
			continue
		}
		switch IPv6(a.Flags) {
		case Preferred:
			return ip
		case Deprecated:
			if !deprecated.IsValid() {
				deprecated = ip
			}
		}
	}
	return deprecated
}

// Others returns the addresses of an interface (as netlink lists them)
// that WireGuard is taken at beside v4 and v6, the sources Choose picked
// (Linux's WireGuard binds its socket to every address): every IPv4
// address and every IPv6 address that is neither link-local (an
// endpoint has no zone) nor Unusable (the kernel receives nothing at a
// tentative address), each once, in netlink's order, at most max of each
// family with v4 or v6 counted; left are those past that bound.
func Others(addrs []netlink.Addr, v4, v6 netip.Addr, max int) (others, left []netip.Addr) {
	n4, n6 := 0, 0
	if v4.IsValid() {
		n4++
	}
	if v6.IsValid() {
		n6++
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip == v4 || ip == v6 || slices.Contains(others, ip) || slices.Contains(left, ip) {
			continue
		}
		n := &n4
		if ip.Is6() {
			if ip.IsLinkLocalUnicast() || IPv6(a.Flags) == Unusable {
				continue
			}
			n = &n6
		}
		if *n >= max {
			left = append(left, ip)
			continue
		}
		*n++
		others = append(others, ip)
	}
	return others, left
}
