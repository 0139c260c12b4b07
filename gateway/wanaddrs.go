package gateway

import (
	"net/netip"
	"slices"

	"github.com/wgpio/wgpio/fastpath"
)

// SetWANAddrs changes our outer addresses while running (an address of
// the WAN interface was added, removed or replaced): addr4 and addr6 are
// the default sources, sent from when the route toward an endpoint
// chooses none of ours (Options.Source); others are the WAN's further
// addresses, at which peers may reach us (a keepalived virtual address).
// A peer's endpoint whose source (the address its last authenticated
// packet was sent to) is no longer one of these, and every endpoint not
// heard from (Routed), get the source their route chooses now, as Linux's
// WireGuard clears an endpoint's source that is no longer usable and
// lets the route choose one (drivers/net/wireguard/socket.c); the peers
// that lost their source are logged once per change, with their number.
// The dataplane's own matching is changed separately
// (fastpath.Engine.SetWAN), before this call, and the caller empties its
// cache of route sources before it (srcaddr.Routes.Flush). The routes are
// asked without the device's lock (peerEndpoint).
func (d *Device) SetWANAddrs(addr4, addr6 netip.Addr, others ...netip.Addr) {
	d.mu.Lock()
	d.opts.WANAddr4, d.opts.WANAddr6 = addr4, addr6
	ours := func(a netip.Addr) bool {
		return a.IsValid() && (a == addr4 || a == addr6 || slices.Contains(others, a))
	}
	var todo []peerEndpoint
	for p := range d.peers.All {
		ep := p.fp.Endpoint.Load()
		if ep == nil || !ep.Routed && ours(ep.Src) && ep.Src.Is4() == ep.Dst.Addr().Unmap().Is4() {
			continue
		}
		todo = append(todo, peerEndpoint{p.fp, ep})
	}
	d.mu.Unlock()
	moved := 0
	lost := map[netip.Addr]bool{}
	for _, pe := range todo {
		if pe.reroute(d.routeSource(pe.ep.Dst.Addr(), addr4, addr6)) && !pe.ep.Routed && pe.ep.Src.IsValid() {
			moved++
			lost[pe.ep.Src] = true
		}
	}
	if moved > 0 {
		var from []netip.Addr
		for a := range lost {
			from = append(from, a)
		}
		slices.SortFunc(from, netip.Addr.Compare)
		d.log.Info("peers reached at a WAN address that is gone are sent to from the address their route chooses", "peers", moved, "gone", from, "default4", addr4, "default6", addr6)
	}
	d.dp.Kick()
}

// RefreshSources asks again for the source of every endpoint not heard
// from (Routed) and moves those whose route chooses another: the caller
// saw routes or addresses change (srcaddr.Routes.Changed), as Linux's
// WireGuard's cached route of an endpoint is dropped when routes change
// and looked up again at the next send. A peer heard from keeps the
// address it reached. Safe for concurrent use.
func (d *Device) RefreshSources() {
	if d.opts.Source == nil {
		return
	}
	d.mu.RLock()
	def4, def6 := d.opts.WANAddr4, d.opts.WANAddr6
	var todo []peerEndpoint
	for p := range d.peers.All {
		if ep := p.fp.Endpoint.Load(); ep != nil && ep.Routed {
			todo = append(todo, peerEndpoint{p.fp, ep})
		}
	}
	d.mu.RUnlock()
	for _, pe := range todo {
		pe.reroute(d.routeSource(pe.ep.Dst.Addr(), def4, def6))
	}
}

// peerEndpoint is a peer's endpoint as it was read under d.mu, to be
// given another source without it: Options.Source takes a netlink round
// trip per endpoint address it has not cached (tens of µs; a change of
// the routes empties its cache), which at many peers would hold the
// device's lock, and so the handshakes, for seconds.
type peerEndpoint struct {
	p  *fastpath.Peer
	ep *fastpath.Endpoint
}

// reroute replaces the endpoint with one of source src, Routed, unless it
// is already that or changed meanwhile (a handshake, a roam, UAPI: they
// win); it reports whether it replaced it.
func (pe peerEndpoint) reroute(src netip.Addr) bool {
	if pe.ep.Routed && pe.ep.Src == src {
		return false
	}
	n := *pe.ep
	n.Src, n.Routed = src, true
	return pe.p.Endpoint.CompareAndSwap(pe.ep, &n)
}

// routeSourceLocked is routeSource with the device's default sources.
// d.mu held.
func (d *Device) routeSourceLocked(dst netip.Addr) netip.Addr {
	return d.routeSource(dst, d.opts.WANAddr4, d.opts.WANAddr6)
}

// routeSource returns the source of what is sent to dst for a peer not
// heard from: the route's choice (Options.Source) when it is of dst's
// family, else the default of that family, def4 or def6 (invalid: none).
// Whether it is one of the WAN's addresses the workers check when they
// build a header from it (fastpath, wanaddrs.go: they fall back to the
// default). d.mu need not be held.
func (d *Device) routeSource(dst, def4, def6 netip.Addr) netip.Addr {
	is4 := dst.Unmap().Is4()
	if d.opts.Source != nil {
		if src := d.opts.Source(dst); src.IsValid() && src.Is4() == is4 {
			return src
		}
	}
	if is4 {
		return def4
	}
	return def6
}
