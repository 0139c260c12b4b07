//go:build linux

package fastgw

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/gateway/tunnelmtu"
)

// watchLANMTU follows the MTU of the LAN port's interface (the trunk the
// AF_XDP port is open on, whose MTU the engine read at start) until
// g.tableDone is closed: each change is handed to the LAN port and the
// engine (setLANMTU, fastpath.Engine.SetLANMTU), so that decrypted packets over the new MTU
// are fragmented or answered with "fragmentation needed" (lan_too_big) as
// a Linux router checks them against the outgoing device's MTU of the
// moment, rather than sent whole for the kernel to drop without a count;
// and logged at info level. A link update that leaves the MTU as it was
// changes nothing. The link going down or up is logged (linkStates).
// The LAN's VLAN device, when its addresses are on one, is followed too,
// for its deletion alone (linkGone). The engine must be running.
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
	indexes := []int{index}
	if g.lanIfindex != index {
		indexes = append(indexes, g.lanIfindex)
	}
	return g.followLinks(g.nsHandle, g.tableDone, "LAN", indexes, func(a netlink.LinkAttrs, _ bool) {
		if a.Index != index {
			return
		}
		states.Note(a)
		if a.MTU == mtu {
			return
		}
		mtu = a.MTU
		g.setLANMTU(a.Name, mtu)
	})
}

// setLANMTU makes mtu, the LAN interface's (name) new MTU, the LAN port's
// (afxdp.Port.SetMTU: the longest frame it sends) and the engine's (what
// it holds decrypted packets to), and logs it. A raise takes effect at
// once: the port's frames are sized for the largest MTU they hold
// (afxdp.Port.MaxMTU, 3,822 bytes). Before, the engine alone took it, and
// the port, its bound the MTU of start, dropped the longer frames as
// too_long: after a raise, packets between the two MTUs were lost
// without an answer. A raise sets the port first, a cut the engine first,
// so that the engine never makes a frame the port drops as too long. An
// MTU above what a frame holds is logged at warning level, with what
// fails and the fix, and both are held to MaxMTU (the kernel drops the
// LAN's longer frames toward the tunnel at the socket, as the warning at
// start says: tunnelmtu.CheckFrames).
func (g *Gateway) setLANMTU(name string, mtu int) {
	held, warn := tunnelmtu.HoldLANMTU(mtu, g.lan.MaxMTU())
	if warn != "" {
		g.log.Warn(warn, "interface", name, "mtu", mtu, "held_to", held)
	}
	if held > g.lan.MTU() {
		if err := g.lan.SetMTU(held); err != nil {
			g.log.Warn("LAN MTU change not taken", "interface", name, "mtu", mtu, "port_mtu", g.lan.MTU(), "err", err)
			return
		}
		g.engine.SetLANMTU(held)
	} else {
		g.engine.SetLANMTU(held)
		if err := g.lan.SetMTU(held); err != nil {
			g.log.Warn("LAN MTU change not taken by the LAN port", "interface", name, "mtu", mtu, "port_mtu", g.lan.MTU(), "err", err)
		}
	}
	g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", name, "mtu", held)
}
