//go:build linux

package fastgw

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/srcaddr"
)

// link describes an interface: index, name, MAC and its first global
// IPv4 and IPv6 addresses.
type link struct {
	index int
	// name is the interface's name when read: a rename while the
	// gateway runs keeps the index, which the gateway follows it by
	// (readLinkIndex).
	name   string
	mtu    int
	mac    net.HardwareAddr
	v4, v6 netip.Addr
	ll6    netip.Addr // the IPv6 link-local source (srcaddr.LinkLocal)
	// nets are the addresses ICMP errors may come from, with their
	// prefix lengths (srcaddr.Subnets): one per destination.
	nets []netip.Prefix
	// all are the host's addresses on the interface, with their
	// subnets' IPv4 directed broadcasts (srcaddr.AppendBroadcasts) and
	// IPv6 subnet-router anycasts (srcaddr.AppendAnycasts), which the
	// host takes as its own; own are the addresses alone.
	all, own []netip.Addr
	// others are the further addresses WireGuard is taken at on a WAN,
	// left those past the XDP match's bound (wanOthers).
	others, left []netip.Addr
}

// readLinkHook, when not nil, runs first in readLink and readLinkIndex
// with the interface's name (as configured, or as last read): an error it
// returns is theirs (a test's way to fail the address follower's
// re-reads). Nil outside tests.
var readLinkHook func(name string) error

// readLink reads interface name and its addresses, as Start does. An
// interface that is not there is an error wrapping
// afxdp.ErrNoSuchInterface.
func readLink(h *netlink.Handle, name string) (link, error) {
	return readLinkWith(h, name, func() (netlink.Link, error) { return h.LinkByName(name) }, func() error {
		return fmt.Errorf("interface %q: %w (list them with `ip link`)", name, afxdp.ErrNoSuchInterface)
	})
}

// readLinkIndex reads the interface of index and its addresses, as
// readLink does, for the gateway's followers while it runs: the kernel's
// routes and neighbours, the XDP programs and the AF_XDP sockets are the
// index's, which a rename (ip link set DEV name NEW) keeps, and name is
// the one it had when last read (for the hook and the messages; link.name
// is the one of now). Before, the followers read the interfaces by the
// names of start, and a rename left the gateway at the addresses of
// before, trying the old name again every 5 s. An index that is not there
// (the interface deleted, or moved to another namespace: the gateway's
// failure, linkGone) is an error wrapping afxdp.ErrNoSuchInterface.
func readLinkIndex(h *netlink.Handle, index int, name string) (link, error) {
	return readLinkWith(h, name, func() (netlink.Link, error) { return h.LinkByIndex(index) }, func() error {
		return fmt.Errorf("interface %q (index %d): %w (deleted, or moved to another namespace: list them with `ip link`)", name, index, afxdp.ErrNoSuchInterface)
	})
}

// readLinkWith is readLink and readLinkIndex: get reads the link, notFound
// is the error of one that is not there.
func readLinkWith(h *netlink.Handle, name string, get func() (netlink.Link, error), notFound func() error) (link, error) {
	if readLinkHook != nil {
		if err := readLinkHook(name); err != nil {
			return link{}, err
		}
	}
	l, err := nldump.Retry(get)
	if err != nil {
		// Only a missing interface is said to be one: a failure of
		// the request (ENOBUFS, ENOMEM) names itself.
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return link{}, notFound()
		}
		return link{}, fmt.Errorf("read interface %q: %w", name, err)
	}
	name = l.Attrs().Name
	out := link{index: l.Attrs().Index, name: name, mtu: l.Attrs().MTU, mac: l.Attrs().HardwareAddr}
	addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return link{}, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	out.v4, out.v6, out.all = srcaddr.Choose(addrs)
	out.nets = srcaddr.Subnets(addrs)
	out.ll6 = srcaddr.LinkLocal(addrs)
	out.others, out.left = wanOthers(addrs, out.v4, out.v6)
	out.own = slices.Clip(out.all)
	out.all = srcaddr.AppendAnycasts(srcaddr.AppendBroadcasts(out.all, addrs), addrs)
	return out, nil
}
