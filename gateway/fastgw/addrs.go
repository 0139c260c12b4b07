package fastgw

import (
	"slices"

	"github.com/vishvananda/netlink"
)

// followAddresses follows the WAN and LAN interfaces' addresses (shared
// mode: the kernel owns them) through netlink, as routes and neighbours
// are followed. On the WAN, when the address the gateway uses goes away or
// another comes, the XDP match, the engine's source and matching, the
// control plane's endpoints and the kernel sockets move to the interface's
// current first address of each family; with no usable address left it
// logs once (and the workers count what cannot be sent as
// no_wan_address). On the LAN, frames to an address added (a keepalived
// virtual address, a renumbering) go to the host, not into the tunnel
// (lanAddressesChanged). It runs until done is closed.
func (g *Gateway) followAddresses(done <-chan struct{}) error {
	updates := make(chan netlink.AddrUpdate, 64)
	opts := netlink.AddrSubscribeOptions{ListExisting: false}
	if g.nsHandle.IsOpen() {
		ns := g.nsHandle
		opts.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(updates, done, opts); err != nil {
		return err
	}
	g.addrWG.Add(1)
	go func() {
		defer g.addrWG.Done()
		warned := false
		for {
			select {
			case <-done:
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				switch u.LinkIndex {
				case g.wanIfindex:
					g.wanAddressesChanged(&warned)
				case g.lanIfindex:
					g.lanAddressesChanged()
				}
			}
		}
	}()
	return nil
}

// wanAddressesChanged re-reads the WAN interface and moves to its addresses.
// The control plane's endpoints move after g.wanMu is released: the UAPI
// takes the device's lock before g.wanMu (moveListenPort), so this must
// not take them the other way round.
func (g *Gateway) wanAddressesChanged(warned *bool) {
	wl, err := readLink(g.nlHandle, g.wanSide.addrDev)
	if err != nil {
		g.log.Warn("re-read the WAN interface after an address change", "err", err)
		return
	}
	if g.moveWAN(wl, warned) {
		g.dev.SetWANAddrs(wl.v4, wl.v6)
	}
	// What a peer sends to the WAN interface's addresses of now goes to
	// the host (fastpath.Config.HostAddrs), as what it sends to the LAN's.
	g.engine.SetHostAddrs(append(slices.Clone(g.lanAddrs), wl.all...))
}

// lanAddressesChanged re-reads the LAN interface's addresses (g.lanAddrs,
// written on followAddresses' goroutine only, once running) and makes them
// the host's: frames from the LAN to them go to the kernel (the LAN XDP
// filter's host addresses, with the tunnel addresses), and so do packets a
// peer sends to them (the engine's HostAddrs). Without that, with
// AllowedIPs = 0.0.0.0/0, what LAN hosts sent to an address added since
// start went into the tunnel. ICMP errors the workers send toward LAN hosts
// keep the LAN address of start as their source.
func (g *Gateway) lanAddressesChanged() {
	ll, err := readLink(g.nlHandle, g.lanSide.addrDev)
	if err != nil {
		g.log.Warn("re-read the LAN interface after an address change", "err", err)
		return
	}
	if slices.Equal(ll.all, g.lanAddrs) {
		return
	}
	g.log.Info("LAN addresses changed", "interface", g.lanSide.addrDev, "from", g.lanAddrs, "to", ll.all)
	g.lanAddrs = ll.all
	if err := g.lan.SetHostAddrs(lanFilter(g.cfg, ll.all, g.lanSide.vid).HostAddrs); err != nil {
		g.log.Warn("update the LAN XDP filter's host addresses", "err", err)
	}
	wl, err := readLink(g.nlHandle, g.wanSide.addrDev)
	if err != nil {
		g.log.Warn("re-read the WAN interface after a LAN address change", "err", err)
		return
	}
	g.engine.SetHostAddrs(append(slices.Clone(ll.all), wl.all...))
}

// moveWAN moves the dataplane to wl's addresses; false if they did not
// change.
func (g *Gateway) moveWAN(wl link, warned *bool) bool {
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	if wl.v4 == g.wanV4 && wl.v6 == g.wanV6 {
		return false
	}
	if !wl.v4.IsValid() && !wl.v6.IsValid() {
		if !*warned {
			g.log.Warn("the WAN interface has no usable address: nothing can be sent until one is added (counted no_wan_address)", "interface", g.cfg.WAN)
			*warned = true
		}
	} else {
		*warned = false
	}
	g.log.Info("WAN address changed", "interface", g.cfg.WAN, "from4", g.wanV4, "to4", wl.v4, "from6", g.wanV6, "to6", wl.v6)
	g.wanV4, g.wanV6 = wl.v4, wl.v6
	if err := g.inNamespace(func() error { // sockets belong to the gateway's namespace
		opened, _ := g.openKernel(g.cfg.ListenPort, wl.v4, wl.v6) // failures are logged
		old := g.kernelSocks
		g.kernelSocks = opened
		for _, c := range old {
			c.Close()
		}
		return nil
	}); err != nil {
		g.log.Warn("reopen the kernel sockets on the new WAN address", "err", err)
	}
	if err := g.wan.SetUDP(g.udpMatches(g.cfg.ListenPort)); err != nil {
		g.log.Warn("update the WAN XDP match", "err", err)
	}
	g.engine.SetWAN(g.cfg.ListenPort, wl.v4, wl.v6)
	return true
}
