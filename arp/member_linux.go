package arp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Membership is an interface's membership of IPv6 multicast groups held by
// a socket (IPV6_JOIN_GROUP, RFC 3493 §5.2): the kernel announces each
// group with MLD reports (RFC 3810) and answers queries for it, so that a
// switch or bridge that snoops MLD forwards the group's frames to the
// interface. A group joined at the link layer only (JoinGroup's
// SIOCADDMULTI) is announced to nobody: behind such a switch the
// neighbour solicitations for owned mode's addresses never arrived.
// Close ends the memberships (the kernel sends MLD Done); so does the
// process's end.
type Membership struct {
	fd int
	// linkOnly are the groups the socket could not join (IPv6 disabled on
	// the interface: no MLD then), joined at the link layer instead.
	linkOnly []netip.Addr
	ifname   string
}

// JoinGroups joins the IPv6 multicast groups on interface ifname of the
// caller's network namespace (the current thread's) with one socket,
// which the Membership holds; a group the socket cannot join (IPv6
// disabled on the interface) is joined at the link layer (JoinGroup), as
// LinkOnly reports. On an error nothing stays joined.
func JoinGroups(ifname string, groups []netip.Addr) (*Membership, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("arp: multicast groups on %s: %w", ifname, err)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("arp: multicast groups: %w", os.NewSyscallError("socket", err))
	}
	m := &Membership{fd: fd, ifname: ifname}
	for _, g := range groups {
		if !g.Is6() || !g.IsMulticast() {
			m.Close()
			return nil, fmt.Errorf("arp: multicast group: %v is not an IPv6 multicast group", g)
		}
		mreq := unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(ifi.Index)}
		serr := unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, &mreq)
		if serr == nil {
			continue
		}
		if lerr := JoinGroup(ifname, g); lerr != nil {
			m.Close()
			return nil, errors.Join(fmt.Errorf("arp: join %v on %s: %w", g, ifname, os.NewSyscallError("setsockopt IPV6_JOIN_GROUP", serr)), lerr)
		}
		m.linkOnly = append(m.linkOnly, g)
	}
	return m, nil
}

// JoinGroupsLinkLayer joins the groups on interface ifname at the link
// layer only (JoinGroup), announced to nobody: for a trunk whose VLAN the
// groups belong to, where the kernel's MLD reports, untagged, would
// announce them on the wrong VLAN. On an error nothing stays joined.
func JoinGroupsLinkLayer(ifname string, groups []netip.Addr) (*Membership, error) {
	m := &Membership{fd: -1, ifname: ifname}
	for _, g := range groups {
		if err := JoinGroup(ifname, g); err != nil {
			m.Close()
			return nil, err
		}
		m.linkOnly = append(m.linkOnly, g)
	}
	return m, nil
}

// LinkOnly returns the groups joined at the link layer only, which no MLD
// report announces (IPv6 disabled on the interface).
func (m *Membership) LinkOnly() []netip.Addr { return m.linkOnly }

// Close leaves the groups. A nil Membership does nothing.
func (m *Membership) Close() error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, g := range m.linkOnly {
		errs = append(errs, LeaveGroup(m.ifname, g))
	}
	m.linkOnly = nil
	if m.fd >= 0 {
		errs = append(errs, unix.Close(m.fd))
		m.fd = -1
	}
	return errors.Join(errs...)
}
