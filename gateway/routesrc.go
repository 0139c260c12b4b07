package gateway

import (
	"net/netip"

	"github.com/wgpio/wgpio/fastpath"
)

// The source of what is sent to a peer not heard from (an endpoint that
// is configured, or whose source left the WAN) is the one the kernel's
// route toward it chooses, as Linux's WireGuard sends with its route
// lookup's source (drivers/net/wireguard/socket.c send4/send6). The
// kernel looks the route up when it sends, keeping the answer in the
// peer's dst_cache until routes change; so does the device, never while
// a configuration is applied: asking is a netlink round trip (some
// 45 µs: 4.5 s at 100,000 endpoints, under the device's lock, where the
// handshakes wait for it). A configured endpoint takes the answer
// Options.Source has cached, else keeps its source for now
// (configuredSource); the route is asked, outside every lock, before the
// first handshake initiation to it leaves (sendSource), and before
// anything else could be sent to it: by a goroutine of its own for a
// peer with a session (rerouteLater), which the workers and keepalives
// send to without a handshake first. Every answer is kept on the
// endpoint (Src, Routed), replaced by compare-and-swap: what a handshake
// or a roam writes meanwhile wins.

// RouteSources gives the source the kernel's route toward an endpoint
// chooses. Safe for concurrent use. gateway/fastgw gives one over the
// kernel's routes (internal/srcaddr.Routes, which a program outside this
// module cannot import); an embedder implements it over its own routes, or
// leaves Options.Source nil and sends from Options.WANAddr4 and WANAddr6.
type RouteSources interface {
	// Source returns the source toward dst (invalid: none), asking the
	// kernel on a miss and waiting for it (a netlink round trip): it is
	// called with no lock of the device held.
	Source(dst netip.Addr) netip.Addr
	// Cached returns the answer toward dst if one is cached, never
	// waiting.
	Cached(dst netip.Addr) (src netip.Addr, ok bool)
	// Generation moves on whenever cached answers are dropped (routes
	// or addresses changed): an answer read at one generation is
	// current while Generation still returns it.
	Generation() uint64
}

// wanDefaults are the default sources of each family (Options.WANAddr4,
// WANAddr6, then SetWANAddrs'), published for readers without d.mu.
type wanDefaults struct{ v4, v6 netip.Addr }

// peerEndpoint is a peer's endpoint as it was read (under d.mu, or by a
// handshake worker), to be given another source without any lock.
type peerEndpoint struct {
	p  *fastpath.Peer
	ep *fastpath.Endpoint
}

// reroute gives pe's endpoint the source its route chooses (routeSource,
// which may ask the kernel: no lock held), Routed, unless it is already
// that; it reports whether it replaced the endpoint. A compare-and-swap
// lost to a handshake, a roam or the UAPI ends it (they win), one lost
// to another answer for the same Dst is tried again; an answer the
// routes changed under (Generation moved while it was asked) is asked
// again, so that an answer of before a change never outlives it.
func (d *Device) reroute(pe peerEndpoint, def4, def6 netip.Addr) (moved bool) {
	ep := pe.ep
	for {
		var gen uint64
		if d.opts.Source != nil {
			gen = d.opts.Source.Generation()
		}
		src := d.routeSource(ep.Dst.Addr(), def4, def6)
		if !ep.Routed || ep.Src != src {
			n := *ep
			n.Src, n.Routed = src, true
			if !pe.p.Endpoint.CompareAndSwap(ep, &n) {
				ep = pe.p.Endpoint.Load()
				if ep == nil || !ep.Routed || ep.Dst != pe.ep.Dst {
					return moved
				}
				continue
			}
			ep, moved = &n, true
		}
		if d.opts.Source == nil || d.opts.Source.Generation() == gen {
			return moved
		}
	}
}

// routeSource returns the source of what is sent to dst for a peer not
// heard from: the route's choice (Options.Source, which may ask the
// kernel: no lock held) when it is of dst's family, else the default of
// that family, def4 or def6 (invalid: none). Whether it is one of the
// WAN's addresses the workers check when they build a header from it
// (fastpath, wanaddrs.go: they fall back to the default).
func (d *Device) routeSource(dst, def4, def6 netip.Addr) netip.Addr {
	is4 := dst.Unmap().Is4()
	if d.opts.Source != nil {
		if src := d.opts.Source.Source(dst); src.IsValid() && src.Is4() == is4 {
			return src
		}
	}
	if is4 {
		return def4
	}
	return def6
}

// configuredSource returns the source of a configured endpoint ap of p
// (old: p's endpoint before, nil: none) without asking the kernel: the
// route's answer if Options.Source has it cached, else (to be asked
// before anything is sent) old's source if old has the same Dst, else
// the default of ap's family; asked reports whether the answer was the
// route's (or, without Options.Source, there is none to ask). d.mu held.
func (d *Device) configuredSource(ap netip.AddrPort, old *fastpath.Endpoint) (src netip.Addr, asked bool) {
	is4 := ap.Addr().Unmap().Is4()
	asked = d.opts.Source == nil
	if !asked {
		if s, ok := d.opts.Source.Cached(ap.Addr()); ok {
			if s.IsValid() && s.Is4() == is4 {
				return s, true
			}
			asked = true
		}
	}
	switch {
	case old != nil && old.Dst == ap && !asked:
		return old.Src, false
	case is4:
		return d.opts.WANAddr4, asked
	default:
		return d.opts.WANAddr6, asked
	}
}

// rerouteLater has the route toward p's endpoint asked by a goroutine of
// its own (reroute): p has a session, and its endpoint was configured
// while the answer was not cached. It never waits. d.mu held.
func (d *Device) rerouteLater(p *peer) {
	d.srcMu.Lock()
	d.srcLater = append(d.srcLater, p)
	start := !d.srcBusy
	d.srcBusy = true
	d.srcMu.Unlock()
	if start {
		d.bg.Add(1)
		go d.rerouteQueued()
	}
}

// rerouteQueued reroutes the peers rerouteLater queued until none is
// left, or the device closes.
func (d *Device) rerouteQueued() {
	defer d.bg.Done()
	for {
		d.srcMu.Lock()
		if len(d.srcLater) == 0 || d.closed() {
			d.srcLater, d.srcBusy = nil, false
			d.srcMu.Unlock()
			return
		}
		p := d.srcLater[0]
		d.srcLater[0] = nil
		d.srcLater = d.srcLater[1:]
		d.srcMu.Unlock()
		if ep := p.fp.Endpoint.Load(); ep != nil && ep.Routed {
			def := d.wanDefs.Load()
			if d.reroute(peerEndpoint{p.fp, ep}, def.v4, def.v6) {
				d.dp.Kick()
			}
		}
	}
}

// sendSource returns the source of pkt, an initiation to p made from its
// endpoint as it stood: if that endpoint is not heard from (Routed), the
// route's answer now, asked (no lock held) and kept on the endpoint, as
// Linux's WireGuard looks the route up when it sends; else pkt.Src.
func (d *Device) sendSource(p *fastpath.Peer, pkt fastpath.ControlPacket) netip.Addr {
	ep := p.Endpoint.Load()
	if d.opts.Source == nil || ep == nil || !ep.Routed || ep.Dst != pkt.Dst {
		return pkt.Src
	}
	def := d.wanDefs.Load()
	src := d.routeSource(pkt.Dst.Addr(), def.v4, def.v6)
	d.reroute(peerEndpoint{p, ep}, def.v4, def.v6)
	return src
}

// setEndpointConfigLocked sets a configured endpoint, not heard from
// (Routed): the source its route chooses if it is cached, else one to
// be replaced by the route's before anything is sent to it, without the
// device's lock (configuredSource); its next hop's MAC if the neighbour
// table has it (known: configuring a peer asks the network nothing, as
// Linux resolves when it first sends there). Without a neighbour source
// (Options.Resolve and Known nil) the MAC the endpoint's address had is kept: the
// last hop a handshake from it came through, the only next hop such a
// device learns. Without it an endpoint set again to the same address
// (wg set ... endpoint, a wg syncconf of the unchanged file, an AddPeer
// of the same configuration) had no MAC, which nothing but the next
// handshake gave back, and the data to the peer was dropped
// (no_neighbour) for up to KeepaliveTimeout + RekeyTimeout (15 s, whitepaper
// §6.5), where Linux's wg0 looks the route up again at its next send.
// d.mu held.
func (d *Device) setEndpointConfigLocked(p *peer, ap netip.AddrPort) {
	// Kept as given (an IPv4-mapped IPv6 address stays one), so that the
	// UAPI prints back what was set, as wireguard-go does.
	old := p.fp.Endpoint.Load()
	src, asked := d.configuredSource(ap, old)
	ep := &fastpath.Endpoint{Dst: ap, Src: src, Routed: true, SrcMAC: d.opts.WANMAC}
	if known := d.known(); known != nil {
		ep.DstMAC, _ = known(ap.Addr()) // nothing is sent yet: no request
	} else if old != nil && old.Dst.Addr().Unmap() == ap.Addr().Unmap() {
		ep.DstMAC = old.DstMAC
	}
	p.fp.Endpoint.Store(ep)
	if !asked && p.fp.Current.Load() != nil {
		d.rerouteLater(p)
	}
}
