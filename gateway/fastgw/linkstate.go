package fastgw

import (
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkUp reports whether the interface a describes can carry frames:
// administratively up (ip link set dev X up) and with carrier (for a
// veth: its other end up too).
func linkUp(a netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
}

// logLinkState logs a change of whether the followed interface a of the
// side named what ("WAN", "LAN") is up (linkUp): at warning level when it
// goes down, naming what is lost and the fix, at info level when it comes
// back. states holds each index's last state; the first state seen of an
// index is logged only if it is down. While a port's link is down, the
// kernel drops what the gateway sends out of it without telling the
// sender (AF_XDP's transmit completes such frames: the gateway counts
// them as sent, the kernel as the interface's TX dropped), and nothing
// arrives: without this line the gateway stayed silent.
func (g *Gateway) logLinkState(states map[int]bool, what string, a netlink.LinkAttrs) {
	up := linkUp(a)
	was, seen := states[a.Index]
	states[a.Index] = up
	switch {
	case seen && was == up, !seen && up:
	case up:
		g.log.Info(what+" link up again: forwarding through it resumes", "interface", a.Name)
	default:
		g.log.Warn(what+" link down: nothing arrives through it, and what the gateway sends out of it is lost (wgpio stats counts it as the port's link_down drops without carrier, ring_full once its TX ring is full when set down; the kernel as TX dropped: ip -s link show dev "+a.Name+") until it is up again",
			"interface", a.Name, "admin_up", a.Flags&net.FlagUp != 0, "carrier", a.RawFlags&unix.IFF_LOWER_UP != 0,
			"fix", "ip link set dev "+a.Name+" up, or check the cable or the link's other end")
	}
}
