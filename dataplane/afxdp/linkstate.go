//go:build linux

package afxdp

import (
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// openControl opens the netlink handle linkUp asks the kernel through,
// in the calling thread's network namespace (the interface's, at Open);
// nil when it cannot (linkUp then answers up).
func openControl() *netlink.Handle {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil
	}
	return h
}

// linkUp reports whether the port's interface is up with its carrier on
// (IFF_UP and IFF_LOWER_UP of RTM_GETLINK by index: the carrier as the
// transmit path sees it, where the operational state, IFF_RUNNING, follows
// it asynchronously); true when it cannot tell. A netlink round trip on
// the transmit drop path only. Safe for concurrent use until Close.
func (p *Port) linkUp() bool {
	if p.ctl == nil {
		return true
	}
	l, err := p.ctl.LinkByIndex(p.ifindex)
	if err != nil {
		return true
	}
	f := l.Attrs().RawFlags
	return f&unix.IFF_UP != 0 && f&unix.IFF_LOWER_UP != 0
}
