//go:build linux

package compatgw

import (
	"hash/maphash"
	"maps"
	"net/netip"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/allowedips"
	"github.com/wgpio/wgpio/tundev"
)

// noEndpointSetter is what the PortDevice drops of the LAN's traffic for
// peers without an endpoint (*tundev.PortDevice).
type noEndpointSetter interface {
	SetNoEndpoint(routes []tundev.EndpointRoute)
}

// publishNoEndpoint tells the PortDevice, when g.noRoute takes them, the
// allowed IPs want (prefix to peer) with a check of each peer the sync's
// read w gave no endpoint (a road warrior that has not connected since the
// gateway started), so that the LAN's packets to it are dropped as
// no_endpoint and answered with host unreachable, as Linux's wg0 and the
// fast path answer them, where wireguard-go would hold them uncounted
// (tundev.PortDevice.SetNoEndpoint). It tells it again only when the set
// of such peers or, while there are any, the allowed IPs or their peers
// changed (a prefix moved between peers included, which the Go API may do
// unseen: ownersSum): O(allowed IPs) map look-ups and hashes, plus a
// table of them when told. g.mu must be held.
func (g *Gateway) publishNoEndpoint(w *allowedips.GetWriter, want map[netip.Prefix]device.NoisePublicKey) {
	s, ok := g.noRoute.(noEndpointSetter)
	if !ok {
		return
	}
	none := make(map[device.NoisePublicKey]struct{})
	for _, k := range want {
		if !w.HasEndpoint(k) {
			none[k] = struct{}{}
		}
	}
	if len(none) == 0 {
		if g.noEndpoint == nil || len(g.noEndpoint) > 0 {
			s.SetNoEndpoint(nil)
		}
		g.noEndpoint, g.noEndpointOwners = none, 0
		return
	}
	sum := ownersSum(want)
	if g.noEndpoint != nil && maps.Equal(none, g.noEndpoint) && sum == g.noEndpointOwners {
		return
	}
	g.noEndpoint, g.noEndpointOwners = none, sum
	checks := make(map[device.NoisePublicKey]*endpointCheck, len(none))
	for k := range none {
		checks[k] = &endpointCheck{dev: g.dev, key: k}
	}
	routes := make([]tundev.EndpointRoute, 0, len(want))
	for p, k := range want {
		r := tundev.EndpointRoute{Prefix: p}
		if c := checks[k]; c != nil {
			r.Peer = c
		}
		routes = append(routes, r)
	}
	s.SetNoEndpoint(routes)
}

// ownersSeed seeds ownersSum.
var ownersSeed = maphash.MakeSeed()

// ownersSum digests want, the allowed IPs and their peers, in 64 bits
// whatever its order (a sum of a hash of each prefix with its peer's
// key), so that a sync finds a change of them without keeping a copy
// (tens of bytes an allowed IP).
func ownersSum(want map[netip.Prefix]device.NoisePublicKey) uint64 {
	var sum uint64
	var b [1 + 16 + 1 + device.NoisePublicKeySize]byte
	for p, k := range want {
		if p.Addr().Is4() {
			b[0] = 4
		} else {
			b[0] = 6
		}
		a := p.Addr().As16()
		copy(b[1:], a[:])
		b[17] = byte(p.Bits())
		copy(b[18:], k[:])
		sum += maphash.Bytes(ownersSeed, b[:])
	}
	return sum
}

// movesAllowedIPs reports whether a set's ops (allowedips.Edit) may
// change which peer an address routes to: any but selecting (or creating,
// with no allowed IP yet) a peer.
func movesAllowedIPs(ops []allowedips.Op) bool {
	for _, op := range ops {
		if op.Kind != allowedips.OpPublicKey {
			return true
		}
	}
	return false
}

// forgetNoEndpoint turns the PortDevice's check of peers without an
// endpoint off until the next sync: a set that changed the allowed IPs
// may have moved a prefix to another peer (a move changes no prefix of
// the LAN filter: followSet's difference misses it), and the check must
// never answer unreachable for a packet wireguard-go would send. g.mu
// must be held.
func (g *Gateway) forgetNoEndpoint() {
	if g.noEndpoint == nil {
		return
	}
	if s, ok := g.noRoute.(noEndpointSetter); ok {
		s.SetNoEndpoint(nil)
	}
	g.noEndpoint, g.noEndpointOwners = nil, 0
}

// endpointCheck asks wireguard-go whether the peer of key has an endpoint
// now (tundev.EndpointChecker): wireguard-go has no accessor for it, but
// Peer.SendBuffers fails before it sends anything when the peer has none
// ("no known endpoint for peer") and otherwise hands the buffers to the
// bind, which sends nothing for none (bind.Bind.Send): a lookup and two
// locks of wireguard-go's, no datagram. A peer once seen with an endpoint
// keeps it (wireguard-go never clears one), so the answer true is kept;
// a peer no longer configured is answered true too (wireguard-go routes
// its packets, if any, by its own table). Safe for concurrent use.
type endpointCheck struct {
	dev *device.Device
	key device.NoisePublicKey
	has atomic.Bool
}

// HasEndpoint implements tundev.EndpointChecker.
func (c *endpointCheck) HasEndpoint() bool {
	if c.has.Load() {
		return true
	}
	p := c.dev.LookupPeer(c.key)
	if p != nil && p.SendBuffers(nil) != nil {
		return false
	}
	c.has.Store(true)
	return true
}
