//go:build linux

package compatgw

import (
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// resubscribeDelay is how long followAddresses waits before it
// subscribes again after its subscription ended on an error.
const resubscribeDelay = time.Second

// followAddresses follows the WAN and LAN interfaces' addresses (shared
// mode: the kernel owns them) through netlink, as fast-path mode does.
// When a WAN address is replaced (DHCP, renumbering), the WAN's XDP filter
// matches the interface's first address of each family of now and the
// bind listens on and sends from them, so that peers reach the new address
// and follow it when they receive from it (roaming); with no address left
// it logs once. When the LAN's addresses change, they are the host's
// (lanAddressesChanged). h is a netlink handle in the gateway's namespace,
// owned by the follower from now on (closed when it stops); wan and lan
// are the interfaces of start (their names, indexes). The updates waiting
// when one arrives are taken with it and each interface re-read once for
// them all. When the subscription ends on an error (its socket overflowed
// in a burst of address changes: ENOBUFS), the error is logged, and after
// resubscribeDelay it subscribes again and re-reads both, so that what
// changed meanwhile is not missed; the ended subscription's socket is
// closed first (one was kept per renewal until Close). It runs until
// Close.
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
		for {
			wanChanged, lanChanged := false, false
			select {
			case <-g.stop:
				return
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
			if wanChanged {
				g.wanAddressesChanged(h, wanName, &warned)
			}
			if lanChanged {
				g.lanAddressesChanged(h, lanName)
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

// wanAddressesChanged re-reads the WAN interface and moves the XDP match
// and the bind to its addresses: the sources and the further ones, at
// which WireGuard is taken too and from which the bind answers a peer
// that reached it there (bind's local.go).
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
	g.warnWANLeft(name, wan.left)
	if err := g.wan.SetUDP(bind.XDPFilter(addrs, g.listenPort, false).UDP); err != nil {
		g.log.Warn("update the WAN XDP match", "err", err)
	}
	g.routeSrc.Flush() // the sources chosen among the addresses of before
	g.bind.SetAddrs(wan.v4, wan.v6, wan.others...)
	g.wanAddrs = addrs
}

// warnWANLeft logs the WAN addresses past the XDP match's bound, at which
// WireGuard is not taken (the kernel drops what is sent there).
func (g *Gateway) warnWANLeft(name string, left []netip.Addr) {
	if len(left) > 0 {
		g.log.Warn("the WAN has more addresses than the XDP match holds: WireGuard is not taken at these", "interface", name, "max_per_family", afxdp.MaxUDPAddrs, "left", left)
	}
}

// lanAddressesChanged re-reads the LAN interface and makes its addresses of
// now the host's, as fast-path mode does: frames from the LAN to them go
// to the kernel (the LAN XDP filter's host addresses; without that, an
// address added while running, such as a keepalived virtual address, that
// lies in a peer's allowed IPs was sent into the tunnel), and the answers
// to oversized packets come from them (the LAN device's ICMP sources;
// with those of start, a LAN that got its IPv6 address after start got no
// "packet too big"), those to a LAN host's link-local address from the
// interface's link-local one; the sources are set also when only the
// choice changed (an IPv6 address whose duplicate address detection
// ended: the addresses are the same). g.lanAddrs is the follower's alone
// once running.
func (g *Gateway) lanAddressesChanged(h *netlink.Handle, name string) {
	lan, err := readIface(h, name)
	if err != nil {
		g.log.Warn("re-read the LAN interface after an address change", "err", err)
		return
	}
	g.lanDev.SetICMPSources(lan.v4, lan.v6)
	g.lanDev.SetICMPLinkLocal(lan.ll6)
	if slices.Equal(lan.all, g.lanAddrs) {
		return
	}
	g.log.Info("LAN addresses changed", "interface", name, "from", g.lanAddrs, "to", lan.all)
	g.lanAddrs = lan.all
	if err := g.lan.SetHostAddrs(lan.all); err != nil {
		g.log.Warn("update the LAN XDP filter's host addresses", "err", err)
	}
}
