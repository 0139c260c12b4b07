package fastpath

import "github.com/wgpio/wgpio/header"

// icmpWAN answers p, a packet the host's kernel forwarded into the
// exception interface from neither the host itself, nor the LAN, nor a
// peer (a WAN host's packet to the tunnel's prefix that no peer holds),
// with e as Linux's wg0 would (icmp_ndo_send, then the route back): from
// our WAN address of p's family, out of the WAN to the next hop toward
// p's source, under the per-destination limit. Where the route back
// leads out of another interface (WANRoutes) or the WAN has no address of
// the family, nothing is sent (the fast path has no way out there); where
// the next hop's MAC is not known yet, its resolution is asked for and
// this error is not sent (Linux would queue it for the neighbour). Before,
// such an error went to the host from the address that could not be
// reached, and the host's kernel routed it out of the WAN with that
// address as its source, under the global limit only.
func (w *worker) icmpWAN(p []byte, e icmpError, now int64) {
	src := header.SourceAddr(p)
	if r, ok := w.e.cfg.WANResolver.(WANRoutes); ok && !r.HasRoute(src) {
		return
	}
	s := w.e.wan.Load()
	from := s.addr6
	if src.Is4() {
		from = s.addr4
	}
	if !from.IsValid() || !w.icmpAllowed(p, e, viaWAN, now) {
		return
	}
	mac, ok := w.e.cfg.WANResolver.Resolve(src)
	if !ok {
		return
	}
	w.sendICMP(w.wanTX, w.wanL2, w.wanVLAN, header.MAC(mac), header.MAC(w.wanMAC), p, from, e)
}
