//go:build linux

package fastgw

import (
	"fmt"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/nldump"
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
// (lanAddressesChanged).
//
// The updates waiting when one arrives are taken with it, and each side
// they name is re-read once: a burst of hundreds costs a few reads, not
// one each. When the subscription ends on an error (its socket overflowed
// in such a burst: ENOBUFS), the error is logged, and after
// resubscribeDelay followAddresses subscribes again and re-reads both
// sides, so that what changed meanwhile is not missed (as followLinks);
// the ended subscription's socket is closed first (netlink closes it only
// at the subscription's end: one was kept per renewal until Close). A
// re-read that fails (readLinkIndex: ENOBUFS, ENOMEM, a dump interrupted past
// nldump.Retry's tries) is logged and tried again (nldump.Again) until it
// succeeds; it was dropped, the change unfollowed until another came.
// The interfaces are read by their indexes (readLinkIndex), as the
// updates name them: one renamed while the gateway runs is followed as
// before, under its new name in the messages (renamed). It runs until
// done is closed.
func (g *Gateway) followAddresses(done <-chan struct{}) error {
	ch, end, err := g.subscribeAddrs()
	if err != nil {
		return err
	}
	g.addrWG.Add(1)
	go func() {
		defer g.addrWG.Done()
		defer func() {
			if end != nil { // nil: done closed while subscribing again
				end()
				// netlink's reader may be waiting to hand over an
				// update (a burst at Close): taken, it finds its
				// socket closed and closes ch.
				go func(ch <-chan netlink.AddrUpdate) {
					for range ch {
					}
				}(ch)
			}
		}()
		warned := false
		// Both interfaces are read once first: an address added, or one
		// whose duplicate address detection ended, between Start's
		// reading and the subscription sent its update before anyone
		// listened, and no later update may come.
		wan, lan := true, true
		// A re-read that failed is tried again (again), not dropped:
		// the change it was for would wait for another.
		var again nldump.Again
		wanFailed, lanFailed := false, false
		for {
			if wan {
				wanFailed = !g.wanAddressesChanged(&warned)
			}
			if lan {
				lanFailed = !g.lanAddressesChanged()
			}
			again.After(wanFailed || lanFailed)
			wan, lan = false, false
			select {
			case <-done:
				return
			case <-again.C:
				again.Fired()
				wan, lan = wanFailed, lanFailed
			case u, ok := <-ch:
				if !ok {
					end()
					if ch, end = g.resubscribeAddrs(done); ch == nil {
						return
					}
					wan, lan = true, true
					break
				}
				wan, lan = u.LinkIndex == g.wanIfindex, u.LinkIndex == g.lanIfindex
			burst:
				for {
					select {
					case u, ok := <-ch:
						if !ok {
							break burst // seen closed at the next turn
						}
						wan = wan || u.LinkIndex == g.wanIfindex
						lan = lan || u.LinkIndex == g.lanIfindex
					default:
						break burst
					}
				}
			}
		}
	}()
	return nil
}

// subscribeAddrs subscribes to the address updates of the gateway's
// namespace until end is called; an error that ends the subscription is
// logged at warning level, but not the one end causes. end closes the
// subscription's netlink socket, which netlink (v1.3.1) keeps open after
// an error that ended the subscription until then: it must be called
// once, also after the updates channel closed.
func (g *Gateway) subscribeAddrs() (updates <-chan netlink.AddrUpdate, end func(), err error) {
	ch := make(chan netlink.AddrUpdate, 64)
	stop := make(chan struct{})
	opts := netlink.AddrSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-stop: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the WAN and LAN addresses", "err", err)
		}
	}}
	if g.nsHandle.IsOpen() {
		ns := g.nsHandle
		opts.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(ch, stop, opts); err != nil {
		close(stop)
		return nil, nil, fmt.Errorf("follow the WAN and LAN addresses: %w", err)
	}
	return ch, func() { close(stop) }, nil
}

// resubscribeAddrs subscribes again (subscribeAddrs), every
// resubscribeDelay until it succeeds; nil when done is closed first.
func (g *Gateway) resubscribeAddrs(done <-chan struct{}) (<-chan netlink.AddrUpdate, func()) {
	for {
		select {
		case <-done:
			return nil, nil
		case <-time.After(resubscribeDelay):
		}
		ch, end, err := g.subscribeAddrs()
		if err != nil {
			g.log.Warn("following the WAN and LAN addresses: subscribe again", "err", err)
			continue
		}
		g.log.Info("following the WAN and LAN addresses again after their subscription ended")
		return ch, end
	}
}

// wanAddressesChanged re-reads the WAN interface and moves to its addresses.
// The control plane's endpoints move after g.wanMu is released: the UAPI
// takes the device's lock before g.wanMu (moveListenPort), so this must
// not take them the other way round.
//
// It returns false when the interface could not be read (the follower
// tries again: nldump.Again).
func (g *Gateway) wanAddressesChanged(warned *bool) bool {
	wl, err := readLinkIndex(g.nlHandle, g.wanIfindex, g.wanName)
	if err != nil {
		g.log.Warn("re-read the WAN interface after an address change; trying again", "err", err)
		return false
	}
	g.renamed("WAN", &g.wanName, wl)
	if g.moveWAN(wl, warned) {
		if g.routeSrc != nil {
			g.routeSrc.Flush() // the sources chosen among the addresses of before
		}
		g.dev.SetWANAddrs(wl.v4, wl.v6, wl.others...)
	}
	// What a peer sends to the WAN interface's addresses of now goes to
	// the host (fastpath.Config.HostAddrs), as what it sends to the LAN's,
	// and so does what a LAN host sends them.
	g.engine.SetHostAddrs(append(slices.Clone(g.lanAddrs), wl.all...))
	if !slices.Equal(wl.all, g.wanAll) {
		g.wanAll = wl.all
		g.setLANHostAddrs()
		g.dp.Retake(append(slices.Clone(g.lanNets), wl.nets...)) // a connected route of the WAN's may be gone, or new
	}
	return true
}

// setLANHostAddrs gives the LAN XDP filter the host addresses of now
// (lanHostAddrs of g.lanAddrs and g.wanAll), on followAddresses'
// goroutine.
func (g *Gateway) setLANHostAddrs() {
	host, left := lanHostAddrs(g.cfg, g.lanAddrs, g.wanAll)
	g.warnHostAddrsLeft(left)
	if err := g.lan.SetHostAddrs(host); err != nil {
		g.log.Warn("update the LAN XDP filter's host addresses", "err", err)
	}
}

// lanAddressesChanged re-reads the LAN interface's addresses (g.lanAddrs,
// written on followAddresses' goroutine only, once running) and makes them
// the host's: frames from the LAN to them go to the kernel (the LAN XDP
// filter's host addresses, with the tunnel addresses), and so do packets a
// peer sends to them (the engine's HostAddrs). Without that, with
// AllowedIPs = 0.0.0.0/0, what LAN hosts sent to an address added since
// start went into the tunnel. The ICMP errors the workers send toward LAN
// hosts (and into the tunnel, for a family without a tunnel address) come
// from the interface's first address of each family of now, as Linux
// sends them from an address of the interface they leave by (RFC 1812
// §4.3.2.4, RFC 4443 §2.2): Engine.SetLANAddrs, also when only the choice
// changed (an IPv6 address whose duplicate address detection ended), and
// those to a LAN host's link-local address from the interface's
// link-local one (Engine.SetLANLinkLocal; shared mode only: in owned
// mode the kernel's addresses are not the gateway's).
//
// It returns false when an interface could not be read (the follower
// tries again: nldump.Again).
func (g *Gateway) lanAddressesChanged() bool {
	ll, err := readLinkIndex(g.nlHandle, g.lanIfindex, g.lanName)
	if err != nil {
		g.log.Warn("re-read the LAN interface after an address change; trying again", "err", err)
		return false
	}
	g.renamed("LAN", &g.lanName, ll)
	if v4, v6 := g.engine.LANAddrs(); v4 != ll.v4 || v6 != ll.v6 {
		g.log.Info("LAN source of ICMP errors changed", "interface", ll.name, "from4", v4, "to4", ll.v4, "from6", v6, "to6", ll.v6)
		g.engine.SetLANAddrs(ll.v4, ll.v6)
	}
	if !slices.Equal(ll.nets, g.lanNets) {
		g.lanNets = ll.nets
		g.engine.SetLANSubnets(ll.nets)
	}
	if old := g.engine.LANLinkLocal(); old != ll.ll6 {
		g.log.Info("LAN source of ICMPv6 errors to link-local addresses changed", "interface", ll.name, "from", old, "to", ll.ll6)
		g.engine.SetLANLinkLocal(ll.ll6)
	}
	if slices.Equal(ll.all, g.lanAddrs) {
		return true
	}
	// The WAN's addresses are the host's too: read before anything
	// changes, so that a try again after a failure does it all.
	wl, err := readLinkIndex(g.nlHandle, g.wanIfindex, g.wanName)
	if err != nil {
		g.log.Warn("re-read the WAN interface after a LAN address change; trying again", "err", err)
		return false
	}
	g.renamed("WAN", &g.wanName, wl)
	g.log.Info("LAN addresses changed (the host's, with their subnets' directed broadcasts)", "interface", ll.name, "from", g.lanAddrs, "to", ll.all)
	g.lanAddrs = ll.all
	g.setLANHostAddrs()
	g.dp.Retake(append(slices.Clone(ll.nets), wl.nets...)) // a connected route of the LAN's may be gone, or new
	g.engine.SetHostAddrs(append(slices.Clone(ll.all), wl.all...))
	return true
}

// moveWAN moves the dataplane to wl's addresses (the defaults and the
// further ones: wanaddrs.go); false if they did not change.
func (g *Gateway) moveWAN(wl link, warned *bool) bool {
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	if wl.v4 == g.wanV4 && wl.v6 == g.wanV6 && slices.Equal(wl.others, g.wanOthers) {
		return false
	}
	if !wl.v4.IsValid() && !wl.v6.IsValid() {
		if !*warned {
			g.log.Warn("the WAN interface has no usable address: nothing can be sent until one is added (counted no_wan_address)", "interface", wl.name)
			*warned = true
		}
	} else {
		*warned = false
	}
	if wl.v4 != g.wanV4 || wl.v6 != g.wanV6 {
		g.log.Info("WAN address changed", "interface", wl.name, "from4", g.wanV4, "to4", wl.v4, "from6", g.wanV6, "to6", wl.v6)
	}
	if !slices.Equal(wl.others, g.wanOthers) {
		g.log.Info("WAN's further addresses changed (WireGuard is taken at them too)", "interface", wl.name, "from", g.wanOthers, "to", wl.others)
		g.warnWANLeft(wl.left)
	}
	g.wanV4, g.wanV6, g.wanOthers = wl.v4, wl.v6, wl.others
	g.syncKernel()
	// The engine first: a datagram the XDP match redirects to an address
	// just added must find the workers taking it (else not_for_us, and a
	// handshake lost for 5 s); one to an address just removed, still
	// redirected for a moment, is for no address of ours either way.
	g.engine.SetWAN(g.cfg.ListenPort, wl.v4, wl.v6, wl.others...)
	if err := g.wan.SetUDP(g.udpMatches(g.cfg.ListenPort)); err != nil {
		g.log.Warn("update the WAN XDP match", "err", err)
	}
	return true
}

// renamed takes l's name as the one of the address device of the side
// named what ("WAN", "LAN"), *name, and logs the change at info level
// when it was renamed since last read (ip link set DEV name NEW): the
// gateway follows it by its index all the same. On followAddresses'
// goroutine.
func (g *Gateway) renamed(what string, name *string, l link) {
	if l.name == *name {
		return
	}
	g.log.Info(what+" interface renamed; followed by its index as before", "from", *name, "to", l.name, "index", l.index)
	*name = l.name
}
