//go:build linux

package fastgw

import "github.com/wgpio/wgpio/internal/linkfollow"

// GoneError is the error Failed sends when an interface the gateway
// runs on was deleted or moved to another namespace: What names the
// interface's role ("WAN interface", "LAN interface", ...), Name its
// name as last seen ("" if unknown) and Index its index. Match it with
// errors.As. (The type lives in an internal package, shared with the
// other gateway packages; this name is how callers reach it.)
type GoneError = linkfollow.GoneError

// Failed returns the channel on which the gateway's failure while it runs
// is sent, once (linkfollow.Failure): a *GoneError when an
// interface it runs on is deleted or moved to another namespace (ip link
// del, a NIC unplugged, a VLAN device or veth a network manager or
// container runtime removes and creates again): the WAN or LAN interface
// its AF_XDP sockets and XDP programs are on, the kernel VLAN device of a
// side whose addresses, routes and neighbours it follows there, or the
// exception TUN. The gateway keeps running after it, but nothing crosses
// the interface deleted, and one of that name created again is a new
// interface (a new index) its sockets, programs and followers are not
// on: the caller is expected to Close it and exit with an error, for its
// service to start it again (`wgpio up` exits with status 1, and
// dist/wgpio.service restarts it). Each deletion is logged at error
// level, with what was on the interface and what happens. Nothing is sent
// once Close has begun (Close deletes the exception TUN itself). The
// channel is never closed; one receive takes the error. Safe for
// concurrent use.
func (g *Gateway) Failed() <-chan error { return g.failure.C() }

// linkGone is followLinks' OnGone: the interface index of the side named
// what ("WAN", "LAN", "exception TUN"; name as last seen, or "" when the
// follower never read it: the one the gateway started with then) was
// deleted.
// Fatal for each: a WAN or LAN trunk took its port with it, a VLAN device
// the side's addresses, routes and neighbours the gateway followed by its
// index; and the gateway cannot create the exception TUN again while it
// runs (its file descriptor is the one it was created with), with its
// tunnel addresses and the routes of the allowed IPs, so the host's own
// traffic through the tunnel would stay cut until a restart.
func (g *Gateway) linkGone(what string, index int, name string) {
	e := &linkfollow.GoneError{What: what + " interface", Name: name, Index: index}
	s, addrIndex := g.wanSide, g.wanIfindex
	if what == "LAN" {
		s, addrIndex = g.lanSide, g.lanIfindex
	}
	if name == "" {
		switch {
		case what == "exception TUN":
			e.Name = g.cfg.Name
		case index == addrIndex:
			e.Name = s.addrDev
		default: // a side follows its trunk and its address device
			e.Name = s.trunk
		}
	}
	meaning := linkfollow.PortGone(what)
	switch {
	case what == "exception TUN":
		e.What = what
		meaning = "the host's own traffic through the tunnel went through it, with the gateway's tunnel addresses and the routes of the allowed IPs, and the gateway cannot create it again while it runs; " +
			"stopping so that the service restarts the gateway, which creates it anew (Linux's `ip link del wg0` ends its tunnel for good: stop the service for that)"
	case index == addrIndex && s.addrDev != s.trunk:
		e.What = what + " VLAN device"
		meaning = "the gateway followed the " + what + "'s addresses, routes and neighbours on it by its index (its AF_XDP sockets are on the trunk " + s.trunk + "), and one created again is a new interface it does not follow; " + linkfollow.Restart
	}
	g.failure.Gone(g.log, e, meaning)
}
