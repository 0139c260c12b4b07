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
// process's end, SIGKILL included: a group joined at the link layer only
// is held by a packet socket too (packetJoin), not by SIOCADDMULTI, whose
// entries outlived a killed gateway on its interface (`ip maddr`:
// "static") until a later gateway there stopped cleanly.
type Membership struct {
	fd int
	// pfd is the packet socket that holds the link-layer memberships of
	// linkOnly (-1 without one).
	pfd int
	// linkOnly are the groups the socket could not join (IPv6 disabled on
	// the interface: no MLD then), joined at the link layer instead.
	linkOnly []netip.Addr
	ifname   string
}

// JoinGroups joins the IPv6 multicast groups on interface ifname of the
// caller's network namespace (the current thread's) with one socket,
// which the Membership holds; a group the socket cannot join (IPv6
// disabled on the interface) is joined at the link layer (packetJoin), as
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
	m := &Membership{fd: fd, pfd: -1, ifname: ifname}
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
		if lerr := m.packetJoin(ifi.Index, g); lerr != nil {
			m.Close()
			return nil, errors.Join(fmt.Errorf("arp: join %v on %s: %w", g, ifname, os.NewSyscallError("setsockopt IPV6_JOIN_GROUP", serr)), lerr)
		}
	}
	return m, nil
}

// packetJoin joins group on the interface of index ifindex at the link
// layer only, with m's packet socket (opened at the first group): a
// PACKET_MR_MULTICAST membership (packet(7)), which the kernel adds to the
// device's multicast list as SIOCADDMULTI does and drops when the socket
// closes, at the process's end too. The socket is bound to no protocol,
// so it receives nothing. It needs CAP_NET_RAW, as the gateway's packet
// sockets do.
func (m *Membership) packetJoin(ifindex int, group netip.Addr) error {
	if !group.Is6() || !group.IsMulticast() {
		return fmt.Errorf("arp: multicast group: %v is not an IPv6 multicast group", group)
	}
	if m.pfd < 0 {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("arp: multicast group %v on %s: %w", group, m.ifname, os.NewSyscallError("socket", err))
		}
		m.pfd = fd
	}
	mac := MulticastMAC(group)
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_MULTICAST, Alen: uint16(len(mac))}
	copy(mreq.Address[:], mac[:])
	if err := unix.SetsockoptPacketMreq(m.pfd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fmt.Errorf("arp: multicast group %v on %s: %w", group, m.ifname, os.NewSyscallError("setsockopt PACKET_ADD_MEMBERSHIP", err))
	}
	m.linkOnly = append(m.linkOnly, group)
	return nil
}

// JoinGroupsLinkLayer joins the groups on interface ifname at the link
// layer only (a packet socket's memberships, see packetJoin), announced
// to nobody: for a trunk whose VLAN the groups belong to, where the
// kernel's MLD reports, untagged, would announce them on the wrong VLAN.
// On an error nothing stays joined.
func JoinGroupsLinkLayer(ifname string, groups []netip.Addr) (*Membership, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("arp: multicast groups on %s: %w", ifname, err)
	}
	m := &Membership{fd: -1, pfd: -1, ifname: ifname}
	for _, g := range groups {
		if err := m.packetJoin(ifi.Index, g); err != nil {
			m.Close()
			return nil, err
		}
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
	m.linkOnly = nil
	if m.pfd >= 0 {
		errs = append(errs, unix.Close(m.pfd))
		m.pfd = -1
	}
	if m.fd >= 0 {
		errs = append(errs, unix.Close(m.fd))
		m.fd = -1
	}
	return errors.Join(errs...)
}
