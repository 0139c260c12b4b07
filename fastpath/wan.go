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
	port         uint16
	addr4, addr6 netip.Addr // either may be invalid (no address of that family)
}

// SetWAN changes the listen port and the outer addresses while the engine
// runs (wg set listen-port, an address replaced on the WAN interface).
// Workers follow at their next turn: datagrams to the old port or address
// are then not ours (not_for_us), and what they send leaves from the new
// ones. Peers whose SrcPortBase is 0 send from the new port (range). An
// invalid addr4 and addr6 both mean the WAN has no usable address: control
// packets are then dropped as no_wan_address. Safe for concurrent use.
func (e *Engine) SetWAN(port uint16, addr4, addr6 netip.Addr) error {
	if port == 0 {
		return errors.New("fastpath: listen port is required")
	}
	e.wan.Store(&wanState{port: port, addr4: addr4.Unmap(), addr6: addr6})
	e.Kick()
	return nil
}

// WAN returns the listen port and the outer addresses in use.
func (e *Engine) WAN() (port uint16, addr4, addr6 netip.Addr) {
	s := e.wan.Load()
	return s.port, s.addr4, s.addr6
}
