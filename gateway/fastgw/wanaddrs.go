//go:build linux

package fastgw

import (
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/srcaddr"
)

// The WAN's further addresses (shared address mode): WireGuard is taken at
// every address of the WAN interface, as Linux's WireGuard, whose socket
// is bound to the wildcard address, takes it at every address of the host
// (a keepalived virtual address beside the primary, a multi-homed WAN's
// secondary address). The first address of each family (link.v4, v6) is
// the default source; the others (link.others) are matched by the XDP
// program, held by kernel sockets for reassembled datagrams, and given to
// the engine and the control plane, which answer a peer from the address
// it reached us at (fastpath, wanaddrs.go); a peer not heard from is sent
// to from the source the kernel's route toward its endpoint chooses
// (routeSrc, followSources), the default only when the route gives none
// of ours. Followed through netlink with the default addresses
// (addrs.go).

// followSources moves the endpoints of peers not heard from that have a
// session to the source their route chooses after each change of the
// namespace's routes or addresses (srcaddr.Routes.Changed,
// gateway.Device.RefreshSources; the others are asked at their next
// initiation), until done is closed; in shared mode,
// where the kernel's routes are the host's (owned mode sends from its
// one WANAddress).
func (g *Gateway) followSources(done <-chan struct{}) {
	if g.routeSrc == nil {
		return
	}
	g.addrWG.Add(1)
	go func() {
		defer g.addrWG.Done()
		for {
			select {
			case <-done:
				return
			case <-g.routeSrc.Changed():
				g.dev.RefreshSources()
			}
		}
	}()
}

// wanOthers returns the addresses of an interface (as netlink lists them)
// that WireGuard is taken at beside v4 and v6, at most afxdp.MaxUDPAddrs
// of each family with v4 or v6 counted (srcaddr.Others); left are those
// past that bound.
func wanOthers(addrs []netlink.Addr, v4, v6 netip.Addr) (others, left []netip.Addr) {
	return srcaddr.Others(addrs, v4, v6, afxdp.MaxUDPAddrs)
}

// wanAddrs returns the WAN addresses WireGuard is taken at: the defaults
// (when valid), then the others. g.wanMu held.
func (g *Gateway) wanAddrs() []netip.Addr {
	var all []netip.Addr
	for _, a := range []netip.Addr{g.wanV4, g.wanV6} {
		if a.IsValid() {
			all = append(all, a)
		}
	}
	return append(all, g.wanOthers...)
}

// warnWANLeft logs the WAN addresses past the XDP match's bound, at which
// WireGuard is not taken (the kernel drops what is sent there), on
// Start's goroutine, then followAddresses' (g.wanName).
func (g *Gateway) warnWANLeft(left []netip.Addr) {
	if len(left) > 0 {
		g.log.Warn("the WAN has more addresses than the XDP match holds: WireGuard is not taken at these", "interface", g.wanName, "max_per_family", afxdp.MaxUDPAddrs, "left", left)
	}
}

// syncKernel makes the kernel sockets for reassembled datagrams
// (listenKernel) match the WAN addresses of now at the listen port
// (kernelsock.Set.Sync). g.wanMu held.
func (g *Gateway) syncKernel() {
	if g.kernel != nil {
		g.kernel.Sync(g.wanAddrs()...)
	}
}
