package tundev

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// endpointAnswer is an EndpointChecker that answers has.
type endpointAnswer struct{ has bool }

func (e endpointAnswer) HasEndpoint() bool { return e.has }

// TestPortDeviceNoEndpoint: a received packet whose longest allowed IP
// is a peer's that has no endpoint is dropped, counted as no_endpoint and
// answered with host unreachable; one to a more specific allowed IP of a
// peer with an endpoint, or to a peer marked without one that has one
// now, is read; SetNoEndpoint without marked peers turns the check off.
func TestPortDeviceNoEndpoint(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.ICMPSource4 = lanIP })
	dropped := netip.MustParseAddr("198.18.12.5")
	inside := netip.MustParseAddr("198.18.12.200")
	connected := netip.MustParseAddr("198.18.14.1")
	r.dev.SetNoEndpoint([]EndpointRoute{
		{Prefix: netip.MustParsePrefix("198.18.12.0/24"), Peer: endpointAnswer{false}},
		{Prefix: netip.MustParsePrefix("198.18.12.128/25")},
		{Prefix: netip.MustParsePrefix("198.18.14.0/24"), Peer: endpointAnswer{true}},
	})
	frames := [][]byte{
		ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, dropped, []byte("x"))),
		ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, inside, []byte("y"))),
		ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, connected, []byte("z"))),
	}
	r.inject(t, 0, frames...)
	if got := readAll(t, r.dev, 2); len(got) != 2 || got[0] != inside || got[1] != connected {
		t.Errorf("read packets to %v, want to %v and %v", got, inside, connected)
	}
	s := r.dev.Stats()
	if s.Drops[PortDropNoEndpoint] != 1 || s.Drops.Total() != 1 || s.ICMPErrors != 1 {
		t.Errorf("Stats() = %+v, want 1 no_endpoint drop, answered", s)
	}
	if f := r.collect(1); len(f) != 1 || f[0][header.EthernetLen+header.IPv4MinLen] != 3 {
		t.Errorf("answers %x, want one destination unreachable", f)
	}
	r.dev.SetNoEndpoint([]EndpointRoute{{Prefix: netip.MustParsePrefix("198.18.12.0/24")}})
	if r.dev.noEndpoint.Load() != nil {
		t.Error("SetNoEndpoint without a peer to check left a table")
	}
	r.inject(t, 0, frames[0])
	if got := readAll(t, r.dev, 1); len(got) != 1 || got[0] != dropped {
		t.Errorf("with the check off: read packets to %v, want to %v", got, dropped)
	}
}
