//go:build linux

package fastgw

import "github.com/wgpio/wgpio/internal/linkfollow"

// linkStates logs the followed interfaces of the side named what ("WAN",
// "LAN") going down and coming back (linkfollow.StateLog). While a port's
// link is down, AF_XDP's transmit completes the frames the gateway sends
// out of it (the gateway counts them as sent, the kernel as the
// interface's TX dropped), and nothing arrives.
func (g *Gateway) linkStates(what string) *linkfollow.StateLog {
	return &linkfollow.StateLog{Log: g.log, What: what,
		Counted: "without carrier, wgpio stats counts it as the port's link_down drops; set down, the port's TX ring holds it, counted as sent, and sends it late once the link is up (Linux drops it), and ring_full counts what the full ring refused"}
}
