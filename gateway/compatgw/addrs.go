//go:build linux

package compatgw

import (
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/nldump"
)

// resubscribeDelay is how long followAddresses waits before it
// subscribes again after its subscription ended on an error.
const resubscribeDelay = time.Second

// beforeFollow, when not nil, runs in Start between its reading of the
// interfaces and followAddresses' subscription: a test's way into that
// window (TestAddressAddedBeforeFollowing). Nil outside tests.
var beforeFollow func()

// followAddresses follows the WAN and LAN interfaces' addresses (shared
// mode: the kernel owns them) through netlink, as fast-path mode does.
// When a WAN address is replaced (DHCP, renumbering), the WAN's XDP filter
// matches the interface's first address of each family of now and the
// bind listens on and sends from them, so that peers reach the new address
// and follow it when they receive from it (roaming); with no address left
// it logs once. When the LAN's addresses change, they are the host's
// (lanAddressesChanged). h is a netlink handle in the gateway's namespace,
// owned by the follower from now on (closed when it stops); wan and lan
// are the interfaces of start (their names, indexes), read by their
// indexes (readIfaceIndex), as the updates name them: one renamed while
// the gateway runs is followed as before, under its new name in the
// messages (renamed). The updates waiting
// when one arrives are taken with it and each interface re-read once for
// them all. When the subscription ends on an error (its socket overflowed
// in a burst of address changes: ENOBUFS), the error is logged, and after
// resubscribeDelay it subscribes again and re-reads both, so that what
// changed meanwhile is not missed; the ended subscription's socket is
// closed first (one was kept per renewal until Close). A re-read that
// fails (readIfaceIndex: ENOBUFS, ENOMEM, a dump interrupted past
// nldump.Retry's tries) is logged and tried again (nldump.Again) until it
// succeeds; it was dropped, the change unfollowed until another came. It
// runs until Close.
func (g *Gateway) followAddresses(h *netlink.Handle, wanName, lanName string, wanIndex, lanIndex int) error {
	updates, end, err := g.subscribeAddrs()
	if err != nil {
		h.Close()
		return err
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer h.Close()
		defer func() {
			if end != nil { // nil: closed while subscribing again
				end()
				// netlink's reader may be waiting to hand over an
				// update (a burst at Close): taken, it finds its
				// socket closed and closes updates.
				go func(ch <-chan netlink.AddrUpdate) {
					for range ch {
					}
				}(updates)
			}
		}()
		warned := false
		// Both interfaces are read once first: an address added, or one
		// whose duplicate address detection ended, between Start's
		// reading and the subscription sent its update before anyone
		// listened, and no later update may come.
		wanChanged, lanChanged := true, true
		// A re-read that failed is tried again (again), not dropped:
		// the change it was for would wait for another.
		var again nldump.Again
		wanFailed, lanFailed := false, false
		for {
			if wanChanged {
				wanFailed = !g.wanAddressesChanged(h, wanIndex, &wanName, &warned)
			}
			if lanChanged {
				lanFailed = !g.lanAddressesChanged(h, lanIndex, &lanName)
			}
			again.After(wanFailed || lanFailed)
			wanChanged, lanChanged = false, false
			select {
			case <-g.stop:
				return
			case <-again.C:
				again.Fired()
				wanChanged, lanChanged = wanFailed, lanFailed
			case u, ok := <-updates:
				if !ok {
					end() // its socket: netlink closes it on end only
					if updates, end = g.resubscribeAddrs(); updates == nil {
						return
					}
					wanChanged, lanChanged = true, true
					break
				}
				wanChanged, lanChanged = u.LinkIndex == wanIndex, u.LinkIndex == lanIndex
			burst:
				for {
					select {
					case u, ok := <-updates:
						if !ok {
							break burst // seen closed at the next turn
						}
						wanChanged = wanChanged || u.LinkIndex == wanIndex
						lanChanged = lanChanged || u.LinkIndex == lanIndex
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
// namespace until end is called or Close; an error that ends the
// subscription is logged at warning level, but not the one Close causes.
// end closes the subscription's netlink socket, which netlink keeps open
// after an error until then (v1.3.1: the socket is closed only when the
// done channel is); it must be called once, also after the updates
// channel closed (a resubscription).
func (g *Gateway) subscribeAddrs() (updates <-chan netlink.AddrUpdate, end func(), err error) {
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	opts := netlink.AddrSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-g.stop: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the WAN and LAN addresses", "err", err)
		}
	}}
	if g.nsHandle.IsOpen() {
		ns := g.nsHandle
		opts.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(ch, done, opts); err != nil {
		close(done)
		return nil, nil, err
	}
	return ch, func() { close(done) }, nil
}

// resubscribeAddrs subscribes again, every resubscribeDelay until it
// succeeds (see subscribeAddrs); nil when the gateway is closed first.
func (g *Gateway) resubscribeAddrs() (<-chan netlink.AddrUpdate, func()) {
	for {
		select {
		case <-g.stop:
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

// wanAddressesChanged re-reads the WAN interface and moves the XDP match,
// the bind and the kernel sockets for reassembled datagrams
// (listenKernel) to its addresses: the sources and the further ones, at
// which WireGuard is taken too and from which the bind answers a peer
// that reached it there (bind's local.go). Its addresses and their
// directed broadcasts are the host's (publishHostAddrs). The interface
// is index's, named *name when last read (renamed).
//
// It returns false when the interface could not be read (the follower
// tries again: nldump.Again).
func (g *Gateway) wanAddressesChanged(h *netlink.Handle, index int, name *string, warned *bool) bool {
	wan, err := readIfaceIndex(h, index, *name)
	if err != nil {
		g.log.Warn("re-read the WAN interface after an address change; trying again", "err", err)
		return false
	}
	g.renamed("WAN", name, wan)
	if !slices.Equal(wan.all, g.wanAll) {
		g.wanAll = wan.all
		g.publishHostAddrs()
		g.setLANFilterHosts()
	}
	addrs := wan.addrs()
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	if slices.Equal(addrs, g.wanAddrs) {
		return true
	}
	if len(addrs) == 0 {
		if !*warned {
			g.log.Warn("the WAN interface has no usable address: nothing can be sent until one is added", "interface", wan.name)
			*warned = true
		}
	} else {
		*warned = false
	}
	g.log.Info("WAN address changed", "interface", wan.name, "from", g.wanAddrs, "to", addrs)
	g.warnWANLeft(wan.name, wan.left)
	if err := g.wan.SetUDP(bind.XDPFilter(addrs, g.listenPort, false).UDP); err != nil {
		g.log.Warn("update the WAN XDP match", "err", err)
	}
	g.routeSrc.Flush() // the sources chosen among the addresses of before
	g.bind.SetAddrs(wan.v4, wan.v6, wan.others...)
	g.wanAddrs = addrs
	g.kernel.Sync(addrs...) // the kernel sockets too (listenKernel)
	return true
}

// warnWANLeft logs the WAN addresses past the XDP match's bound, at which
// WireGuard is not taken (the kernel drops what is sent there).
func (g *Gateway) warnWANLeft(name string, left []netip.Addr) {
	if len(left) > 0 {
		g.log.Warn("the WAN has more addresses than the XDP match holds: WireGuard is not taken at these", "interface", name, "max_per_family", afxdp.MaxUDPAddrs, "left", left)
	}
}

// NoLANAddress is the warning Start logs of a LAN without an IPv4 or a
// global IPv6 address (srcaddr.Choose's sources), with the interface and
// the fix (`wgpio check -system` gives it before a start), and what fails
// with it: the LAN's hosts
// have no router address to send to (the kernel answers ARP and NDP for
// its own addresses only, so their ARP for the address they route
// through goes unanswered), the kernel has no route toward them out of
// the LAN, so the LAN device drops the decrypted packets for them
// (their route, if any, leads elsewhere: off_lan), unanswered, and no
// ICMP error (fragmentation needed, time exceeded, host unreachable)
// reaches them, for want of a source.
const NoLANAddress = "LAN has no IPv4 or global IPv6 address: its hosts find no router address here (the kernel answers ARP and NDP for its own addresses only), so nothing they send reaches the tunnel; " +
	"the kernel has no route toward them on the LAN, so what the tunnel sends them is dropped (off_lan, lan (tundev) in wgpio stats), and no ICMP error reaches them; " +
	"add the address the LAN's hosts route through (followed at once)"

// noteLANAddress logs NoLANAddress, with the interface's name and the fix,
// when lan has neither an IPv4 nor a global IPv6 address and had one
// before (had; true at start), so that it is said at start and once when
// the last one is removed, not at every change while none is there; it
// reports whether lan has one.
func (g *Gateway) noteLANAddress(name string, lan iface, had bool) bool {
	has := lan.v4.IsValid() || lan.v6.IsValid()
	if !has && had {
		g.log.Warn(NoLANAddress, "interface", name, "fix", "ip addr add ADDRESS/PREFIX dev "+name)
	}
	return has
}

// lanAddressesChanged re-reads the LAN interface and makes its addresses of
// now and their directed broadcasts the host's, as fast-path mode does:
// frames from the LAN to them go to the kernel (the LAN XDP filter's host
// addresses; without that, an
// address added while running, such as a keepalived virtual address, that
// lies in a peer's allowed IPs was sent into the tunnel), decrypted
// packets to them are dropped (publishHostAddrs), and the answers
// to oversized packets come from them (the LAN device's ICMP sources;
// with those of start, a LAN that got its IPv6 address after start got no
// "packet too big"), those to a LAN host's link-local address from the
// interface's link-local one; the sources are set also when only the
// choice changed (an IPv6 address whose duplicate address detection
// ended: the addresses are the same). The last IPv4 or global IPv6
// address removed is warned about (noteLANAddress). g.lanAddrs and
// g.lanAddressed are the follower's alone once running. The interface is
// index's, named *name when last read (renamed).
//
// It returns false when the interface could not be read (the follower
// tries again: nldump.Again).
func (g *Gateway) lanAddressesChanged(h *netlink.Handle, index int, name *string) bool {
	lan, err := readIfaceIndex(h, index, *name)
	if err != nil {
		g.log.Warn("re-read the LAN interface after an address change; trying again", "err", err)
		return false
	}
	g.renamed("LAN", name, lan)
	g.lanDev.SetICMPSources(lan.v4, lan.v6)
	g.lanDev.SetICMPLinkLocal(lan.ll6)
	g.lanDev.SetICMPSubnets(lan.nets)
	if slices.Equal(lan.all, g.lanAddrs) {
		return true
	}
	g.log.Info("LAN addresses changed (the host's, with their subnets' directed broadcasts)", "interface", lan.name, "from", g.lanAddrs, "to", lan.all)
	g.lanAddrs = lan.all
	g.lanAddressed = g.noteLANAddress(lan.name, lan, g.lanAddressed)
	g.setLANFilterHosts()
	g.publishHostAddrs()
	return true
}

// renamed takes i's name as the one of the interface of the side named
// what ("WAN", "LAN"), *name, and logs the change at info level when it
// was renamed since last read (ip link set DEV name NEW): the gateway
// follows it by its index all the same. On followAddresses' goroutine.
func (g *Gateway) renamed(what string, name *string, i iface) {
	if i.name == *name {
		return
	}
	g.log.Info(what+" interface renamed; followed by its index as before", "from", *name, "to", i.name, "index", i.index)
	*name = i.name
}

// setLANFilterHosts gives the LAN XDP filter the host's addresses of now
// (lanFilterHosts of g.lanAddrs and g.wanAll). Called by the address
// follower alone.
func (g *Gateway) setLANFilterHosts() {
	if err := g.lan.SetHostAddrs(lanFilterHosts(g.lanAddrs, g.wanAll, g.tunnelHeld)); err != nil {
		g.log.Warn("update the LAN XDP filter's host addresses", "err", err)
	}
}

// lanFilterHosts are the addresses the LAN XDP filter leaves to the host:
// the LAN's, then the WAN's (a LAN host's SSH to the gateway's WAN address
// went to wireguard-go, sealed for a peer with AllowedIPs = 0.0.0.0/0),
// then the tunnel addresses the host holds (tunnelnets.go), at most
// afxdp.MaxHostAddrs of each family, the first in that order.
func lanFilterHosts(lan, wan, tunnel []netip.Addr) []netip.Addr {
	var out []netip.Addr
	var n4, n6 int
	for _, a := range slices.Concat(lan, wan, tunnel) {
		a = a.Unmap()
		n := &n6
		if a.Is4() {
			n = &n4
		}
		if *n < afxdp.MaxHostAddrs && !slices.Contains(out, a) {
			*n++
			out = append(out, a)
		}
	}
	return out
}

// publishHostAddrs tells the LAN device the host's own addresses
// (tundev.PortDevice.SetHostAddrs): the tunnel addresses, and the LAN's
// and the WAN's addresses with their IPv4 directed broadcasts
// (iface.all), as Linux's local table holds them. A decrypted packet to
// one of them Linux delivers locally and forwards none of; compat mode
// has no way into the host's stack (no exception TUN, and the host no
// route back into the tunnel for an answer), so the device drops it as
// local, at once. Before, it was sent to the LAN: a directed broadcast
// or the LAN's own address waited a second for a neighbour that never
// answers, holding up the peer's packets behind it, and the latter was
// answered "host unreachable" from itself; the tunnel and WAN addresses
// were forwarded as any destination (back into the tunnel when a peer's
// allowed IPs held them, else no_route). Called at start, then by the
// address follower alone.
func (g *Gateway) publishHostAddrs() {
	g.lanDev.SetHostAddrs(slices.Concat(g.tunnelAddrs, g.lanAddrs, g.wanAll))
}
