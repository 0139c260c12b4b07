package gateway

import (
	"net/netip"
	"slices"
)

// SetWANAddrs changes our outer addresses while running (an address of
// the WAN interface was added, removed or replaced): addr4 and addr6 are
// the default sources, the ones configured endpoints set later take;
// others are the WAN's further addresses, at which peers may reach us
// (a keepalived virtual address). A peer's endpoint whose source (the
// address its last authenticated packet was sent to, or the default it
// was configured with) is no longer one of these moves to the default of
// its family (invalid: no usable address of that family; the workers then
// count what they cannot send), as Linux's WireGuard clears an
// endpoint's source that is no longer usable and lets the route choose
// one (drivers/net/wireguard/socket.c): such peers are logged once per
// change, with their number. The dataplane's own matching is changed
// separately (fastpath.Engine.SetWAN), before this call.
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
		if ep == nil {
			continue
		}
		is4 := ep.Dst.Addr().Unmap().Is4()
		src := addr6
		if is4 {
			src = addr4
		}
		if ep.Src == src || ours(ep.Src) && ep.Src.Is4() == is4 {
			continue
		}
		n := *ep
		n.Src = src
		if p.fp.Endpoint.CompareAndSwap(ep, &n) && ep.Src.IsValid() && ep.Src != src {
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
		d.log.Info("peers reached at a WAN address that is gone are sent to from the default address", "peers", moved, "gone", from, "default4", addr4, "default6", addr6)
	}
	d.dp.Kick()
}
