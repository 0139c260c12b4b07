package fastpath

import (
	"errors"
	"net/netip"
)

// wanState is our side of the WAN: the listen port and the outer addresses
// the workers match received datagrams against and send from. It is swapped
// whole (Engine.SetWAN) and loaded by each worker once per turn of its
// loop; never modified after it is published.
type wanState struct {
	port uint16
	// addr4 and addr6 are the default sources, the interface's first
	// address of each family: what a peer is sent from when it has no
	// source of its own (Endpoint.Src). Either may be invalid (no address
	// of that family).
	addr4, addr6 netip.Addr
	// others are the WAN's further addresses (a keepalived virtual
	// address, a secondary address), at which WireGuard is taken too and
	// from which a peer that reached us there is answered (wanaddrs.go).
	// Nil when there are none.
	others map[netip.Addr]struct{}
}

// SetWAN changes the listen port and the outer addresses while the engine
// runs (wg set listen-port, an address added to or removed from the WAN
// interface). addr4 and addr6 are the default sources; others are the
// WAN's further addresses, which are ours too (datagrams to them are taken,
// and a peer whose endpoint's Src is one of them is sent to from it); an
// address of others equal to a default, invalid, or repeated counts once.
// Workers follow at their next turn: datagrams to an address or port no
// longer ours are then not ours (not_for_us), and what they send leaves
// from the new ones. A peer's endpoint whose Src is no longer ours is sent
// from its family's default (the control plane moves such endpoints:
// gateway.Device.SetWANAddrs). Peers whose SrcPortBase is 0 send from the
// new port (range). An invalid addr4 and addr6 both mean the WAN has no
// usable address: control packets are then dropped as no_wan_address.
// Safe for concurrent use.
func (e *Engine) SetWAN(port uint16, addr4, addr6 netip.Addr, others ...netip.Addr) error {
	if port == 0 {
		return errors.New("fastpath: listen port is required")
	}
	e.wan.Store(newWANState(port, addr4, addr6, others))
	e.Kick()
	return nil
}

// WAN returns the listen port and the default outer addresses in use.
func (e *Engine) WAN() (port uint16, addr4, addr6 netip.Addr) {
	s := e.wan.Load()
	return s.port, s.addr4, s.addr6
}
