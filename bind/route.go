package bind

import "net/netip"

// RouteSources gives the source the kernel's route toward an endpoint
// chooses. Safe for concurrent use. gateway/compatgw gives one over the
// kernel's routes (internal/srcaddr.Routes, which a program outside this
// module cannot import); an embedder implements it over its own routes, or
// leaves Config.Source nil and sends from Addr4 and Addr6.
type RouteSources interface {
	// Source returns the source toward dst (invalid: none), asking the
	// kernel on a miss and waiting for it (a netlink round trip).
	Source(dst netip.Addr) netip.Addr
	// Cached returns the answer toward dst if one is cached, never
	// waiting.
	Cached(dst netip.Addr) (src netip.Addr, ok bool)
	// Ask has the source toward dst asked in the background, never
	// waiting: Cached has it once answered.
	Ask(dst netip.Addr)
	// Generation moves on whenever cached answers are dropped (routes
	// or addresses changed): an answer read at one generation is
	// current while Generation still returns it.
	Generation() uint64
}

// routeAnswer is the route's source toward an endpoint's address as of
// generation gen of RouteSources.
type routeAnswer struct {
	src netip.Addr
	gen uint64
}

// routeSource returns the source rs's route toward dst (e's address)
// chooses, kept on e as Linux's WireGuard keeps it in the peer's
// dst_cache until routes change (drivers/net/wireguard/socket.c): e's
// answer while it is of the current generation (two atomic loads), else
// a cached one (kept on e: one allocation per endpoint per change of
// routes, not per call); with neither, e's previous answer while rs asks
// in the background (Ask: a change of routes costs a send no netlink
// round trip), and only for an endpoint never answered the kernel is
// asked and waited for (once per endpoint; ParseEndpoint queued the
// question, so that it is mostly answered by then). Safe for concurrent
// use: several senders may ask for the same e.
func (e *Endpoint) routeSource(dst netip.Addr, rs RouteSources) netip.Addr {
	gen := rs.Generation()
	a := e.route.Load()
	if a != nil && a.gen == gen {
		return a.src
	}
	if src, ok := rs.Cached(dst); ok {
		e.route.Store(&routeAnswer{src, gen})
		return src
	}
	if a != nil {
		rs.Ask(dst)
		return a.src
	}
	src := rs.Source(dst)
	e.route.Store(&routeAnswer{src, gen})
	return src
}
