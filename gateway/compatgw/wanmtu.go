//go:build linux

package compatgw

import (
	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/linkfollow"
)

// followWANMTU follows the WAN interface (index; the link the WAN port is
// open on) until Close, as fast-path mode follows it (fastgw's
// watchWANMTU): each change of its MTU is checked against the tunnel MTU
// (tunnelmtu.CheckWAN; over it: a warning with the numbers and the fix,
// else info) and bounds what the WAN port sends (setWANMTU), so that the
// bind sends a tunnel packet the link no longer carries whole as IP
// fragments (counted as the bind's fragmented and fragments), as Linux
// fragments its WireGuard's outer packets, where it kept the MTU of
// start, sent such packets whole in frames the link does not carry,
// counted as transmitted, and logged nothing. The link going down
// (warning: what is lost, where it is counted, the fix) or coming back
// (info) is logged (linkfollow.StateLog), as for the LAN. tunnelMTU is
// Config.MTU; v4 and v6 say which outer families the WAN has at start:
// each change checks those of its addresses then (wanFamilies), since
// the kernel removes a link's IPv6 addresses when its MTU drops below
// 1280 (the warning named IPv6 peers still). It reads links with a
// netlink handle of its own (followLink).
func (g *Gateway) followWANMTU(index, tunnelMTU int, v4, v6 bool) error {
	mtu := g.wan.MTU()
	states := &linkfollow.StateLog{Log: g.log, What: "WAN",
		Counted: "wgpio stats counts it as the bind's link_down drops without carrier, no_wan_route or no_neighbour once the kernel's routes and neighbours of the link are gone when set down"}
	return g.followLink("WAN", index, func(a netlink.LinkAttrs) {
		states.Note(a)
		if a.MTU == mtu {
			return
		}
		mtu = a.MTU
		g.setWANMTU(a.Name, mtu)
		if f4, f6, err := g.wanFamilies(index, a.Name); err == nil {
			v4, v6 = f4, f6
		} else {
			g.log.Warn("re-read the WAN interface's addresses after an MTU change: checking the families of before", "err", err)
		}
		// Over the WAN MTU for one outer family or both, the bind
		// fragments: nothing is lost, but every full-size packet
		// takes two frames or more, and a path that drops fragments
		// loses it; past the bind's fragments, it is dropped (the
		// warning says which).
		if warn := tunnelmtu.CheckWAN(tunnelMTU, mtu, a.Name, 0, v4, v6, wanLimits); warn != "" {
			g.log.Warn("WAN MTU changed: full-size tunnel packets do not fit it whole", "interface", a.Name, "mtu", mtu, "problem", warn,
				"counted", "the bind's fragmented and fragments (wgpio stats); too_big if one cannot be fragmented")
			return
		}
		g.log.Info("WAN MTU changed; the tunnel MTU fits", "interface", a.Name, "mtu", mtu, "tunnel_mtu", tunnelMTU)
	})
}

// wanLimits are compat mode's limits for the WAN MTU's warning
// (tunnelmtu.CheckWAN): any tunnel MTU down to IPv4's least, and the
// bind's fragments of a datagram (more: dropped as too_big).
var wanLimits = tunnelmtu.Limits{Least: header.IPv4MinMTU, MaxFragments: bind.MaxFragments, Dropped: "the bind's too_big"}

// wanFamilies says which outer families the WAN interface (index, named
// name when last seen) has addresses of now (readIface's sources), read
// by its index, which a rename keeps, with a netlink handle of its own
// in the gateway's namespace.
func (g *Gateway) wanFamilies(index int, name string) (v4, v6 bool, err error) {
	h, err := netlink.NewHandleAt(g.nsHandle)
	if err != nil {
		return false, false, err
	}
	defer h.Close()
	wan, err := readIfaceIndex(h, index, name)
	return wan.v4.IsValid(), wan.v6.IsValid(), err
}

// setWANMTU makes mtu, the WAN interface's (name) new MTU, the WAN port's
// (afxdp.Port.SetMTU), held to what a frame holds (MaxMTU): the bind
// reads it once per batch and sends a datagram longer than it as IP
// fragments (bind.Bind.Send). Called by the follower alone.
func (g *Gateway) setWANMTU(name string, mtu int) {
	mtu = min(mtu, g.wan.MaxMTU())
	if mtu == g.wan.MTU() {
		return
	}
	if err := g.wan.SetMTU(mtu); err != nil {
		g.log.Warn("WAN MTU change not taken by the WAN port", "interface", name, "mtu", mtu, "port_mtu", g.wan.MTU(), "err", err)
	}
}
