package compatgw

import (
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/bind"
)

// followWANAddresses follows the WAN interface's addresses (shared mode:
// the kernel owns them) through netlink, as fast-path mode does: when an
// address is replaced (DHCP, renumbering), the WAN's XDP filter matches
// the interface's first address of each family of now and the bind
// listens on and sends from them, so that peers reach the new address and
// follow it when they receive from it (roaming). With no address left it
// logs once. h is a netlink handle in the gateway's namespace, owned by the
// follower from now on (closed when it stops); index is the WAN's
// ifindex. It runs until Close.
func (g *Gateway) followWANAddresses(h *netlink.Handle, name string, index int) error {
	updates := make(chan netlink.AddrUpdate, 64)
	opts := netlink.AddrSubscribeOptions{}
	if g.nsHandle.IsOpen() {
		ns := g.nsHandle
		opts.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(updates, g.stop, opts); err != nil {
		h.Close()
		return err
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer h.Close()
		warned := false
		for {
			select {
			case <-g.stop:
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				if u.LinkIndex == index {
					g.wanAddressesChanged(h, name, &warned)
				}
			}
		}
	}()
	return nil
}

// wanAddressesChanged re-reads the WAN interface and moves the XDP match
// and the bind to its addresses.
func (g *Gateway) wanAddressesChanged(h *netlink.Handle, name string, warned *bool) {
	wan, err := readIface(h, name)
	if err != nil {
		g.log.Warn("re-read the WAN interface after an address change", "err", err)
		return
	}
	addrs := wan.addrs()
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	if slices.Equal(addrs, g.wanAddrs) {
		return
	}
	if len(addrs) == 0 {
		if !*warned {
			g.log.Warn("the WAN interface has no usable address: nothing can be sent until one is added", "interface", name)
			*warned = true
		}
	} else {
		*warned = false
	}
	g.log.Info("WAN address changed", "interface", name, "from", g.wanAddrs, "to", addrs)
	if err := g.wan.SetUDP(bind.XDPFilter(addrs, g.listenPort, false).UDP); err != nil {
		g.log.Warn("update the WAN XDP match", "err", err)
	}
	g.bind.SetAddrs(wan.v4, wan.v6)
	g.wanAddrs = addrs
}
