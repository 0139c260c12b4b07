package fastpath

import (
	"errors"
	"fmt"
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
// It returns an error, and changes nothing, for port 0 or a default of the
// wrong family (addr4 not IPv4, addr6 not IPv6). Safe for concurrent use.
func (e *Engine) SetWAN(port uint16, addr4, addr6 netip.Addr, others ...netip.Addr) error {
	if port == 0 {
		return errors.New("fastpath: listen port is required")
	}
	if err := checkWANFamilies(addr4, addr6); err != nil {
		return err
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

// checkWANFamilies refuses default WAN addresses of the wrong family (an
// IPv6 address as addr4, or an IPv4 or IPv4-mapped one as addr6): the
// workers would send nothing of that family from them, every control
// packet to such a peer dropped as no_wan_address. Either may be invalid.
func checkWANFamilies(addr4, addr6 netip.Addr) error {
	if addr4.IsValid() && !addr4.Unmap().Is4() {
		return fmt.Errorf("fastpath: WAN IPv4 address %v is not an IPv4 address", addr4)
	}
	if addr6.IsValid() && (!addr6.Is6() || addr6.Is4In6()) {
		return fmt.Errorf("fastpath: WAN IPv6 address %v is not an IPv6 address", addr6)
	}
	return nil
}
