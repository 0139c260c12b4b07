//go:build linux

package compatgw

import "github.com/wgpio/wgpio/internal/linkfollow"

// goneState is the gateway's failure (Failed) with the names of the
// interfaces it runs on.
type goneState struct {
	linkfollow.Failure
	// names are the WAN's and LAN's names by index, as configured;
	// written by Start before the followers start.
	names map[int]string
}

// GoneError is the error Failed sends when an interface the gateway
// runs on was deleted or moved to another namespace: What names the
// interface's role ("WAN interface", "LAN interface", ...), Name its
// name as last seen ("" if unknown) and Index its index. Match it with
// errors.As. (The type lives in an internal package, shared with the
// other gateway packages; this name is how callers reach it.)
type GoneError = linkfollow.GoneError

// Failed returns the channel on which the gateway's failure while it runs
// is sent, once (linkfollow.Failure): a *GoneError when the
// WAN or LAN interface its AF_XDP ports and XDP programs are on is
// deleted or moved to another namespace (ip link del, a NIC unplugged, a
// veth a container runtime removes and creates again). The gateway keeps
// running after it, but nothing crosses that interface, and one of that
// name created again is a new interface (a new index) its ports are not
// on: the caller is expected to Close it and exit with an error, for its
// service to start it again (`wgpio up` exits with status 1, and
// dist/wgpio.service restarts it). Each deletion is logged at error
// level, with what was on the interface and what happens. Nothing is sent
// once Close has begun. The channel is never closed; one receive takes
// the error. Safe for concurrent use.
func (g *Gateway) Failed() <-chan error { return g.gone.C() }

// linkGone is followLink's OnGone: the interface index of the side named
// what ("WAN", "LAN"; name as last seen, "" when the follower never read
// it: the configured one then) was deleted.
func (g *Gateway) linkGone(what string, index int, name string) {
	if name == "" {
		name = g.gone.names[index]
	}
	g.gone.Gone(g.log, &linkfollow.GoneError{What: what + " interface", Name: name, Index: index}, linkfollow.PortGone(what))
}
