//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/srcaddr"
)

// iface is an interface's index, name, MTU (bytes), first IPv4 and
// global IPv6 address and the host's own addresses on it.
type iface struct {
	index, mtu int
	// name is the interface's name when read: a rename while the
	// gateway runs keeps the index, which the followers read it by
	// (readIfaceIndex).
	name   string
	v4, v6 netip.Addr // the sources: srcaddr.Choose
	ll6    netip.Addr // the IPv6 link-local source: srcaddr.LinkLocal
	// nets are the addresses with their prefix lengths (srcaddr.Subnets):
	// an error toward a LAN host comes from the one of its subnet.
	nets []netip.Prefix
	// all is every address of the interface, then its IPv4 directed
	// broadcast addresses (srcaddr.AppendBroadcasts) and IPv6
	// subnet-router anycasts (srcaddr.AppendAnycasts): the host's own.
	all []netip.Addr
	// others are the further addresses WireGuard is taken at, left those
	// past the XDP match's bound (srcaddr.Others).
	others, left []netip.Addr
}

// addrs are the addresses WireGuard is taken at: the sources, then the
// others.
func (i iface) addrs() []netip.Addr {
	var out []netip.Addr
	for _, a := range []netip.Addr{i.v4, i.v6} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return append(out, i.others...)
}

// readIfaceHook, when not nil, runs first in readIface and
// readIfaceIndex with the interface's name (as configured, or as last
// read): an error it returns is theirs (a test's way to fail the address
// follower's re-reads). Nil outside tests.
var readIfaceHook func(name string) error

// readIface reads interface name and its addresses, as Start does. An
// interface that is not there is an error wrapping
// afxdp.ErrNoSuchInterface.
func readIface(h *netlink.Handle, name string) (iface, error) {
	return readIfaceWith(h, name, func() (netlink.Link, error) { return h.LinkByName(name) }, func() error {
		return fmt.Errorf("interface %q: %w (list them with `ip link`)", name, afxdp.ErrNoSuchInterface)
	})
}

// readIfaceIndex reads the interface of index and its addresses, as
// readIface does, for the followers while the gateway runs: its ports
// and the kernel's routes and neighbours are the index's, which a rename
// (ip link set DEV name NEW) keeps, and name is the one it had when last
// read (for the hook and the messages; iface.name is the one of now).
// Before, the address follower read the interfaces by the names of start,
// and a rename left the gateway at the addresses of before, trying the
// old name again every 5 s. An index that is not there (the interface
// deleted, or moved to another namespace: the gateway's failure,
// linkGone) is an error wrapping afxdp.ErrNoSuchInterface.
func readIfaceIndex(h *netlink.Handle, index int, name string) (iface, error) {
	return readIfaceWith(h, name, func() (netlink.Link, error) { return h.LinkByIndex(index) }, func() error {
		return fmt.Errorf("interface %q (index %d): %w (deleted, or moved to another namespace: list them with `ip link`)", name, index, afxdp.ErrNoSuchInterface)
	})
}

// readIfaceWith is readIface and readIfaceIndex: get reads the link,
// notFound is the error of one that is not there.
func readIfaceWith(h *netlink.Handle, name string, get func() (netlink.Link, error), notFound func() error) (iface, error) {
	if readIfaceHook != nil {
		if err := readIfaceHook(name); err != nil {
			return iface{}, err
		}
	}
	l, err := nldump.Retry(get)
	if err != nil {
		// Only a missing interface is said to be one: a failure of
		// the request (ENOBUFS, ENOMEM) names itself.
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return iface{}, notFound()
		}
		return iface{}, fmt.Errorf("read interface %q: %w", name, err)
	}
	if err := afxdp.CheckEthernet(l); err != nil {
		return iface{}, err
	}
	name = l.Attrs().Name
	out := iface{index: l.Attrs().Index, name: name, mtu: l.Attrs().MTU}
	addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return iface{}, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	out.v4, out.v6, out.all = srcaddr.Choose(addrs)
	out.ll6 = srcaddr.LinkLocal(addrs)
	out.nets = srcaddr.Subnets(addrs)
	out.others, out.left = srcaddr.Others(addrs, out.v4, out.v6, afxdp.MaxUDPAddrs)
	out.all = srcaddr.AppendAnycasts(srcaddr.AppendBroadcasts(out.all, addrs), addrs)
	return out, nil
}
