//go:build linux

package fastgw

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// watchLANMTU follows the MTU of the LAN port's interface (the trunk the
// AF_XDP port is open on, whose MTU the engine read at start) until
// g.tableDone is closed: each change is handed to the engine
// (fastpath.Engine.SetLANMTU), so that decrypted packets over the new MTU
// are fragmented or answered with "fragmentation needed" (lan_too_big) as
// a Linux router checks them against the outgoing device's MTU of the
// moment, rather than sent whole for the kernel to drop without a count;
// and logged at info level. A link update that leaves the MTU as it was
// changes nothing. The link going down or up is logged (linkStates).
// The engine must be running.
func (g *Gateway) watchLANMTU() error {
	l, err := g.nlHandle.LinkByName(g.lanSide.trunk)
	if err != nil {
		return fmt.Errorf("follow the LAN MTU: %w", err)
	}
	// mtu is the engine's: the port's at its opening (New read
	// Config.LAN.MTU()), not the link's now, which may differ already
	// (followLinks reads it after subscribing, and that change is
	// handed on like any other).
	index, mtu := l.Attrs().Index, g.lan.MTU()
	states := g.linkStates("LAN")
	return g.followLinks(g.nsHandle, g.tableDone, "LAN", []int{index}, func(a netlink.LinkAttrs, _ bool) {
		if a.Index != index {
			return
		}
		states.Note(a)
		if a.MTU == mtu {
			return
		}
		mtu = a.MTU
		g.engine.SetLANMTU(mtu)
		g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", a.Name, "mtu", mtu)
	})
}
