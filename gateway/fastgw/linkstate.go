//go:build linux

package fastgw

import "github.com/wgpio/wgpio/internal/linkfollow"

// linkStates logs the followed interfaces of the side named what ("WAN",
// "LAN") going down and coming back (linkfollow.StateLog). While a port's
// link is without carrier, the kernel drops the frames the gateway sends
// out of it (the port counts them as link_down, the kernel as the
// interface's TX dropped); set down, it takes none: they wait on the TX
// ring, counted by the port as sent once they go out. Nothing arrives.
func (g *Gateway) linkStates(what string) *linkfollow.StateLog {
	return &linkfollow.StateLog{Log: g.log, What: what,
		Counted: "without carrier, wgpio stats counts it as the port's link_down drops; set down, the port's TX ring holds it and sends it late once the link is up (Linux drops it), counted as sent then (link_down if the link is deleted first), and ring_full counts what the full ring refused"}
}
