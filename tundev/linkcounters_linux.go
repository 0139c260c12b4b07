package tundev

import (
	"fmt"
	"net"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkCounters reads a TUN interface's counters that only the kernel
// keeps (kernel_queue_full: the packets the interface's queue dropped,
// its TX drops) over a netlink socket of the interface's namespace. The
// zero value reads nothing. Safe for concurrent use.
type linkCounters struct {
	mu    sync.Mutex
	nl    *netlink.Handle // nil before open and after close
	index int
	name  string
}

// open opens the netlink socket in the caller's network namespace (the
// interface's) and finds interface name's index.
func (c *linkCounters) open(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("tundev: find %s: %w", name, err)
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("tundev: netlink socket for the counters of %s: %w", name, err)
	}
	c.mu.Lock()
	c.nl, c.index, c.name = h, ifi.Index, name
	c.mu.Unlock()
	return nil
}

// read sets s's kernel_queue_full from the interface's TX drops: one
// netlink request, which may wait for the kernel's RTNL lock (not for a
// data path). It leaves s as it is when the interface is gone (or
// another took its index) or the socket is closed.
func (c *linkCounters) read(s *TUNStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nl == nil {
		return
	}
	if l, err := c.nl.LinkByIndex(c.index); err == nil && l.Attrs().Name == c.name && l.Attrs().Statistics != nil {
		s.Drops[TUNDropKernelQueueFull] = l.Attrs().Statistics.TxDropped
	}
}

// setGSOMaxSegs sets the interface's gso_max_segs.
func (c *linkCounters) setGSOMaxSegs(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nl == nil {
		return fmt.Errorf("tundev: %s: no netlink socket", c.name)
	}
	l, err := c.nl.LinkByIndex(c.index)
	if err != nil {
		return err
	}
	return c.nl.LinkSetGSOMaxSegs(l, n)
}

// close closes the socket; read reads nothing after it.
func (c *linkCounters) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nl != nil {
		c.nl.Close()
		c.nl = nil
	}
}
