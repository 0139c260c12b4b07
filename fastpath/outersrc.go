package fastpath

import "github.com/wgpio/wgpio/header"

// The outer headers of a peer's transport messages (wrap). Most of a
// worker's peers are reached from one source, the WAN's MAC and default
// IPv4 address, untagged, without the IPv4 UDP checksum, and their
// headers differ only in the next hop's MAC and the endpoint's address
// and port: the worker keeps that source once (w.src) and each such peer
// those 12 bytes (peerLocal.dst), in the one cache line outbound reads of
// the peer. A peer reached otherwise (IPv6, a further WAN address, a VLAN
// tag, the UDP checksum) keeps a whole template (peerLocal.tmpl), a line
// more per message with traffic for thousands of peers. Both write the
// same bytes (header.UDPTemplate.SplitIPv4).
//
// The shared source is the first the worker builds with the WAN's
// default IPv4 address. After a change of the WAN's addresses (SetWAN,
// SetWANAddrs, a new wanState), the first peer whose headers are built
// again (its endpoint replaced, as SetWANAddrs replaces those whose
// source is gone) and come out with another source with the new default
// address replaces it, once per change: srcGen moves on, and every peer
// built with the old one builds its headers again at its next message
// (wrap), as a peer does when its endpoint changed. Until then a peer's
// headers stay as they were built, as a template's did.

// buildOuter builds pl's outer headers toward ep, its peer's endpoint,
// from ep's addresses and MACs and the WAN's source address for it
// (wanaddrs.go); false when they cannot be built (addresses of different
// families: the message is dropped).
func (w *worker) buildOuter(pl *peerLocal, ep *Endpoint) bool {
	t, ok := header.NewUDPTemplate(header.UDPTemplateConfig{
		Dst: header.MAC(ep.DstMAC), Src: header.MAC(ep.SrcMAC), VLANID: w.wanTag,
		SrcAddr: w.wan.source(ep.Src, ep.Dst.Addr()), DstAddr: ep.Dst.Addr(), DstPort: ep.Dst.Port(),
		UDPChecksumIPv4: w.e.cfg.IPv4UDPChecksum,
	})
	if !ok {
		return false
	}
	pl.tmplEp, pl.srcGen = ep, 0
	if s, d, ok := t.SplitIPv4(); ok && w.useSource(&s) {
		pl.dst, pl.srcGen = d, w.srcGen
		return true
	}
	pl.tmpl = t
	return true
}

// useSource reports whether s is the worker's shared source, making it
// so when there is none yet or the WAN changed since it was taken (above).
func (w *worker) useSource(s *header.UDPv4Source) bool {
	switch {
	case w.srcGen != 0 && *s == w.src:
		return true
	case s.SrcAddr() != w.wan.addr4: // a further address
		return false
	case w.srcGen != 0 && w.wan == w.srcWAN: // replaced since this change already
		return false
	}
	w.src, w.srcWAN = *s, w.wan
	w.srcGen++
	if w.srcGen == 0 {
		// 255 replacements: no peer may still hold the generation
		// that comes round again.
		w.srcGen = 1
		for _, ch := range w.local {
			for i := range ch {
				if pl := &ch[i]; pl.srcGen != 0 {
					pl.tmplEp, pl.srcGen = nil, 0
				}
			}
		}
	}
	return true
}
