package gateway

import (
	"net/netip"
	"slices"
)

// SetWANAddrs changes our outer addresses while running (an address of
// the WAN interface was added, removed or replaced): addr4 and addr6 are
// the default sources, sent from when the route toward an endpoint
// chooses none of ours (Options.Source); others are the WAN's further
// addresses, at which peers may reach us (a keepalived virtual address).
// A peer's endpoint whose source (the address its last authenticated
// packet was sent to) is no longer one of these gets the source its
// route chooses now, as Linux's WireGuard clears an endpoint's source
// that is no longer usable and lets the route choose one
// (drivers/net/wireguard/socket.c); so does every endpoint not heard from
// (Routed) whose peer has a session (the others are asked at their next
// initiation: RefreshSources). The peers that lost their source are
// logged once per change, with their number. The dataplane's own
// matching is changed separately (fastpath.Engine.SetWAN), before this
// call, and the caller empties its cache of route sources (Options.Source)
// before it (gateway/fastgw flushes internal/srcaddr.Routes). The routes
// are asked without the device's lock (peerEndpoint).
func (d *Device) SetWANAddrs(addr4, addr6 netip.Addr, others ...netip.Addr) {
	d.mu.Lock()
	d.opts.WANAddr4, d.opts.WANAddr6 = addr4, addr6
	d.wanDefs.Store(&wanDefaults{addr4, addr6})
	ours := func(a netip.Addr) bool {
		return a.IsValid() && (a == addr4 || a == addr6 || slices.Contains(others, a))
	}
	var todo []peerEndpoint
	for p := range d.peers.All {
		ep := p.fp.Endpoint.Load()
		if ep == nil || !ep.Routed && ours(ep.Src) && ep.Src.Is4() == ep.Dst.Addr().Unmap().Is4() ||
			ep.Routed && p.fp.Current.Load() == nil {
			continue
		}
		todo = append(todo, peerEndpoint{p.fp, ep})
	}
	d.mu.Unlock()
	moved := 0
	lost := map[netip.Addr]bool{}
	for _, pe := range todo {
		if d.reroute(pe, addr4, addr6) && !pe.ep.Routed && pe.ep.Src.IsValid() {
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
// from (Routed) whose peer has a session, and moves those whose route
// chooses another: the caller saw routes or addresses change
// (gateway/fastgw: internal/srcaddr.Routes.Changed, which dropped the
// answers the change may have changed; the others are read from its
// cache), as Linux's
// WireGuard's cached route of an endpoint is dropped when routes change
// and looked up again at the next send. Only these: the workers and the
// keepalives send to them without a handshake first. The others are
// asked at their next handshake initiation (sendSource), as the kernel
// looks the route up at its next send, so that a change of routes costs
// no netlink round trip per peer not heard from (some 45 µs each: 4.5 s
// at 100,000). A peer heard from keeps the address it reached. The
// routes are asked without the device's lock. Safe for concurrent use.
func (d *Device) RefreshSources() {
	if d.opts.Source == nil {
		return
	}
	d.mu.RLock()
	var todo []peerEndpoint
	for p := range d.peers.All {
		if ep := p.fp.Endpoint.Load(); ep != nil && ep.Routed && p.fp.Current.Load() != nil {
			todo = append(todo, peerEndpoint{p.fp, ep})
		}
	}
	d.mu.RUnlock()
	def := d.wanDefs.Load()
	for _, pe := range todo {
		d.reroute(pe, def.v4, def.v6)
	}
}
