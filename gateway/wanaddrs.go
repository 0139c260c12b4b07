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
// packet was sent to) is no longer one of these, and every endpoint not
// heard from (Routed), get the source their route chooses now, as Linux's
// WireGuard clears an endpoint's source that is no longer usable and
// lets the route choose one (drivers/net/wireguard/socket.c); the peers
// that lost their source are logged once per change, with their number.
// The dataplane's own matching is changed separately
// (fastpath.Engine.SetWAN), before this call, and the caller empties its
// cache of route sources before it (srcaddr.Routes.Flush).
func (d *Device) SetWANAddrs(addr4, addr6 netip.Addr, others ...netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.WANAddr4, d.opts.WANAddr6 = addr4, addr6
	ours := func(a netip.Addr) bool {
		return a.IsValid() && (a == addr4 || a == addr6 || slices.Contains(others, a))
	}
	moved := 0
	lost := map[netip.Addr]bool{}
	for p := range d.peers.All {
		ep := p.fp.Endpoint.Load()
		if ep == nil || !ep.Routed && ours(ep.Src) && ep.Src.Is4() == ep.Dst.Addr().Unmap().Is4() {
			continue
		}
		src := d.routeSourceLocked(ep.Dst.Addr())
		if ep.Routed && ep.Src == src {
			continue
		}
		n := *ep
		n.Src, n.Routed = src, true
		if p.fp.Endpoint.CompareAndSwap(ep, &n) && !ep.Routed && ep.Src.IsValid() {
			moved++
			lost[ep.Src] = true
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
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.peers.All {
		ep := p.fp.Endpoint.Load()
		if ep == nil || !ep.Routed {
			continue
		}
		if src := d.routeSourceLocked(ep.Dst.Addr()); src != ep.Src {
			n := *ep
			n.Src = src
			p.fp.Endpoint.CompareAndSwap(ep, &n)
		}
	}
}

// routeSourceLocked returns the source of what is sent to dst for a peer
// not heard from: the route's choice (Options.Source) when it is of dst's
// family, else the default of that family (invalid: none). Whether it is
// one of the WAN's addresses the workers check when they build a header
// from it (fastpath, wanaddrs.go: they fall back to the default). d.mu
// held.
func (d *Device) routeSourceLocked(dst netip.Addr) netip.Addr {
	is4 := dst.Unmap().Is4()
	if d.opts.Source != nil {
		if src := d.opts.Source(dst); src.IsValid() && src.Is4() == is4 {
			return src
		}
	}
	if is4 {
		return d.opts.WANAddr4
	}
	return d.opts.WANAddr6
}
