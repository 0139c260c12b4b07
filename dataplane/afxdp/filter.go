package afxdp

import "net/netip"

// Filter says which received frames the XDP program redirects to the
// port's sockets. Everything else gets XDP_PASS and reaches the kernel's
// stack as if no program were attached (SSH, DHCP, routing, the host's own
// traffic). A frame may carry one 802.1Q tag in front of its EtherType.
type Filter struct {
	// All redirects every frame of at least 14 bytes (a reflector, tests,
	// an interface wgpio owns alone). The other fields are ignored.
	All bool

	// UDP redirects IPv4 (without options, not a fragment) or IPv6 (UDP
	// as the first next header) UDP datagrams to one of these addresses
	// and a destination port in the range: the WAN side of a gateway. At
	// most MaxUDPAddrs addresses of each family (Open fails with more).
	UDP []UDPMatch

	// Fragments redirects UDP fragments to a UDP address too: IPv4 ones
	// (a 20-byte header, MF set or an offset, RFC 791 §3.2) and IPv6
	// ones (a Fragment header as the first next header, followed by UDP,
	// RFC 8200 §4.5). A fragment with an offset carries no UDP header
	// and goes by its destination address alone; a first fragment
	// (offset 0) by its destination port too, where it holds the UDP
	// header (one too short to hold it goes, for the receiver to count).
	// Counted as xdp_redirect_fragment. For a receiver that reassembles
	// them itself: the owned address mode, whose kernel has no address
	// to reassemble for (without it, fragments go to the kernel).
	Fragments bool

	// Neighbours redirects ARP frames (RFC 826) whose target protocol
	// address is one of these IPv4 addresses, and NDP neighbour
	// solicitations and advertisements (RFC 4861 section 4.3, 4.4) whose
	// target or IPv6 destination is one of these IPv6 addresses: the owned
	// address mode of ARCHITECTURE.md, where wgpio answers ARP/NDP itself.
	// At most 64 of each family (Open fails with more).
	Neighbours []netip.Addr
	// NeighbourUpdates redirects, beside Neighbours' frames, every
	// gratuitous ARP frame (sender and target protocol addresses the
	// same) and every NDP neighbour advertisement to a multicast
	// destination (an unsolicited one, to all nodes): the announcements
	// (a gratuitous ARP, RFC 5227 §3; an unsolicited advertisement with
	// the Override flag, RFC 4861 §7.2.6) from which the owned address
	// mode's neighbour table updates an entry it has (RFC 826's merge,
	// RFC 4861 §7.2.5), as Linux's does: a next hop or a LAN host that
	// moved to another MAC (a router replaced, a VRRP failover without a
	// virtual MAC) was reached again only after its entry failed. Counted
	// as xdp_redirect_neighbor.
	NeighbourUpdates bool

	// MLDQueries redirects, on a VLAN (VLAN not 0; ignored otherwise),
	// MLD queries (ICMPv6 type 130, RFC 3810 §5.1) behind an 8-byte
	// Hop-by-Hop Options header, counted as xdp_redirect_neighbor: the
	// owned address mode on a VLAN of a trunk, where the kernel has no
	// VLAN device to answer them and wgpio reports its solicited-node
	// groups itself (arp.MLDHost). Untagged, they are the kernel's.
	MLDQueries bool

	// Prefixes turns on the LAN match: a unicast frame to the port's MAC
	// whose IPv4 or IPv6 destination lies in a prefix added with
	// Port.AddPrefix and is none of HostAddrs, nor multicast, nor
	// 255.255.255.255, is redirected. Broadcast and multicast frames
	// never match (their MAC is not ours).
	Prefixes bool

	// HostAddrs are the host's own addresses on this interface, which the
	// LAN match never redirects: at most MaxHostAddrs of each family
	// (Open fails with more).
	HostAddrs []netip.Addr

	// PrefixCapacity is the most prefixes of each family the LAN match
	// holds (default DefaultPrefixCapacity). The maps allocate an entry
	// when a prefix is added (BPF_F_NO_PREALLOC), so a large capacity
	// costs nothing until it is used.
	PrefixCapacity int

	// VLAN is the 802.1Q VLAN identifier (1-4094) whose frames the filter
	// redirects, or 0 for untagged (and priority-tagged) frames. All
	// ignores it.
	VLAN uint16
}

// MaxHostAddrs is how many host addresses of each family (IPv4, IPv6)
// the LAN match holds (Filter.HostAddrs, Port.SetHostAddrs): the size of
// its preallocated hash maps, looked up per frame.
const MaxHostAddrs = 256

// maxNeighbours is how many addresses of each family the neighbour match
// holds (Filter.Neighbours).
const maxNeighbours = 64

// MaxUDPAddrs is how many addresses of each family the UDP match holds
// (Filter.UDP, Port.SetUDP): the size of its preallocated hash maps,
// looked up per frame (a WAN with this many addresses, its keepalived
// virtual ones included, is taken at all of them).
const MaxUDPAddrs = 256

// DefaultPrefixCapacity is Filter.PrefixCapacity's default: 1,048,576
// prefixes of each family, room for a million peers' /32 and /128.
const DefaultPrefixCapacity = 1 << 20

// UDPMatch is one destination address and an inclusive destination port
// range.
type UDPMatch struct {
	Addr           netip.Addr
	PortLo, PortHi uint16
}
