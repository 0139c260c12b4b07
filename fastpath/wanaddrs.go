package fastpath

import (
	"net/netip"
	"slices"

	"github.com/wgpio/wgpio/header"
)

// The WAN's addresses beyond the default source of each family
// (ARCHITECTURE.md, "The WAN's addresses"). Linux's WireGuard binds its
// socket to every address and answers each peer from the address the
// peer's last authenticated packet was sent to (drivers/net/wireguard:
// the endpoint's src4/src6, kept with the peer's address); the fast path
// does the same: a datagram to any address of wanState is ours, the
// endpoint a peer roams to keeps the outer destination of the packet it
// roamed on as its Src (and a packet from the endpoint itself to another
// of our addresses moves the Src at once: localMoved, roam.go), and
// what is sent to the peer leaves from that Src (the outer header
// template of the peer is built with it, so a source of its own costs
// nothing per packet). An endpoint not heard from has the Src the
// kernel's route chooses (Endpoint.Routed; the control plane asks).

// newWANState makes the state SetWAN publishes: addr4 and addr6 the
// defaults, others the further addresses (IPv4-mapped ones as IPv4; the
// invalid, the defaults and repeats dropped).
func newWANState(port uint16, addr4, addr6 netip.Addr, others []netip.Addr) *wanState {
	s := &wanState{port: port, addr4: addr4.Unmap(), addr6: addr6}
	for _, a := range others {
		a = a.Unmap()
		if !a.IsValid() || a == s.addr4 || a == s.addr6 {
			continue
		}
		if s.others == nil {
			s.others = make(map[netip.Addr]struct{}, len(others))
		}
		s.others[a] = struct{}{}
	}
	return s
}

// has reports whether a is one of our WAN addresses.
func (s *wanState) has(a netip.Addr) bool {
	if a == s.addr4 || a == s.addr6 {
		return a.IsValid()
	}
	_, ok := s.others[a]
	return ok
}

// source returns the outer source toward dst for a peer whose endpoint
// names src: src while it is one of our addresses of dst's family, else
// the default of that family (invalid: none).
func (s *wanState) source(src, dst netip.Addr) netip.Addr {
	if src.Is4() == dst.Unmap().Is4() && s.has(src) {
		return src
	}
	if dst.Unmap().Is4() {
		return s.addr4
	}
	return s.addr6
}

// addrs lists the further addresses, sorted (tests, logs).
func (s *wanState) addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(s.others))
	for a := range s.others {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// WANAddrs returns the WAN's further addresses in use (SetWAN's others,
// without the defaults), sorted. Safe for concurrent use.
func (e *Engine) WANAddrs() []netip.Addr { return e.wan.Load().addrs() }

// otherWAN reports whether the destination of the datagram authenticate
// parsed (w.pkt.Dst), which is neither default address, is one of the
// WAN's further addresses, and then remembers it in *last, which
// authenticate compares first (a burst to such an address is mostly to
// one). Not inlined: traffic to the default addresses never calls it.
//
//go:noinline
func (w *worker) otherWAN(last *netip.Addr) bool {
	if _, ok := w.wan.others[w.pkt.Dst]; ok {
		*last = w.pkt.Dst
		return true
	}
	return false
}

// outerDst returns the outer IP destination of the received WAN frame d
// (from its Ethernet header on; one 802.1Q tag at most, as the WAN filter
// takes): where the peer sent it, the local address its endpoint keeps.
// The fixed IPv4 and IPv6 headers hold it at the same offset whatever
// options or extension headers follow.
func outerDst(d []byte) netip.Addr {
	// The destination's offset in the fixed IPv4 header (RFC 791 §3.1)
	// and the IPv6 header (RFC 8200 §3).
	const dst4, dst6 = 16, 24
	if len(d) < header.EthernetLen+header.VLANTagLen+1 {
		return netip.Addr{}
	}
	l3 := header.EthernetLen
	if header.Ethernet(d).Tagged() {
		l3 += header.VLANTagLen
	}
	switch d[l3] >> 4 {
	case 4:
		if len(d) >= l3+header.IPv4MinLen {
			return netip.AddrFrom4([4]byte(d[l3+dst4 : l3+dst4+4]))
		}
	case 6:
		if len(d) >= l3+header.IPv6Len {
			return netip.AddrFrom16([16]byte(d[l3+dst6 : l3+dst6+16]))
		}
	}
	return netip.Addr{}
}
