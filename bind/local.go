package bind

import "net/netip"

// localAddrs are the Bind's addresses (SetAddrs), immutable once
// published: v4 and v6 the default sources (invalid: none of that
// family), others the interface's further addresses. Datagrams to any of
// them are taken, and the endpoint of a datagram keeps the address it was
// sent to as its source, which Send sends from while the address is the
// Bind's, as Linux's WireGuard and wireguard-go's StdNetBind (IP_PKTINFO)
// answer a peer from the address it reached (conn.Endpoint's SrcIP).
type localAddrs struct {
	v4, v6 netip.Addr
	others map[netip.Addr]struct{} // nil: none
}

func newLocalAddrs(v4, v6 netip.Addr, others []netip.Addr) *localAddrs {
	l := &localAddrs{v4: v4.Unmap(), v6: v6}
	for _, a := range others {
		if a = a.Unmap(); a.IsValid() && a != l.v4 && a != l.v6 {
			if l.others == nil {
				l.others = make(map[netip.Addr]struct{}, len(others))
			}
			l.others[a] = struct{}{}
		}
	}
	return l
}

// has reports whether a is one of the Bind's addresses.
func (l *localAddrs) has(a netip.Addr) bool {
	if a == l.v4 || a == l.v6 {
		return a.IsValid()
	}
	_, ok := l.others[a]
	return ok
}

// source returns the address to send to dst from for endpoint e: e's
// source while it is one of the Bind's addresses of dst's family, else
// the one the route chooses (rs, Config.Source: nil or invalid, none;
// Endpoint.routeSource) while it is one of them, else the default of that
// family (invalid: none).
func (l *localAddrs) source(e *Endpoint, dst netip.Addr, rs RouteSources) netip.Addr {
	v4 := dst.Is4()
	if e.src.Is4() == v4 && l.has(e.src) {
		return e.src
	}
	if rs != nil {
		if src := e.routeSource(dst, rs); src.Is4() == v4 && l.has(src) {
			return src
		}
	}
	if v4 {
		return l.v4
	}
	return l.v6
}

// epKey is the receive path's endpoint cache key: the datagram's source
// and the local address it was sent to.
type epKey struct {
	src   netip.AddrPort
	local netip.Addr
}
