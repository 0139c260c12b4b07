//go:build linux

package compatgw

import (
	"errors"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/internal/linkfollow"
)

// followLANMTU follows the MTU of the LAN interface (index; the link the
// LAN port is open on) until Close, through internal/linkfollow as
// fast-path mode follows it (fastgw's watchLANMTU): each change is handed
// to the LAN port and device (setLANMTU), so that decrypted packets over
// the new MTU are fragmented or answered with "fragmentation needed" /
// "packet too big" (too_big) as a Linux router checks them against the
// outgoing device's MTU of the moment, and a raised one carries longer
// frames at once; and logged at info level. A link update that leaves
// the MTU as it was changes nothing. The link going down (warning: what
// does not leave, where it is counted, and the fix) or coming back (info)
// is logged, as in fast-path mode (linkfollow.StateLog). It reads links
// with a netlink handle of its own (followLink).
func (g *Gateway) followLANMTU(index int) error {
	// mtu is the device's: the port's at its opening, not the link's
	// now, which may differ already (Follow reads it after subscribing,
	// and that change is handed on like any other).
	mtu := g.lanDev.LANMTU()
	states := &linkfollow.StateLog{Log: g.log, What: "LAN",
		Counted: "without carrier, wgpio stats counts it as the LAN device's link_down drops; set down, the LAN port's TX ring holds it, counted as sent, and sends it late once the link is up (Linux drops it), and tx_full counts what the full ring refused"}
	return g.followLink("LAN", index, func(a netlink.LinkAttrs) {
		states.Note(a)
		if a.MTU == mtu {
			return
		}
		mtu = a.MTU
		g.setLANMTU(a.Name, mtu)
	})
}

// followLink runs onLink for each change of the link index (and once for
// its state after subscribing) until Close (linkfollow.Follow; what names
// the side in its logs), and reports its deletion (linkGone), with a netlink handle of its own, opened here in
// the calling thread's namespace (Start's) and closed by Close after the
// follower ended (g.linkWG).
func (g *Gateway) followLink(what string, index int, onLink func(netlink.LinkAttrs)) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	err = linkfollow.Follow(linkfollow.Config{Namespace: g.nsHandle, Links: h, Log: g.log, What: what, Indexes: []int{index},
		OnLink: func(a netlink.LinkAttrs, _ bool) { onLink(a) }, OnGone: func(index int, name string) { g.linkGone(what, index, name) }}, g.stop, &g.linkWG)
	if err != nil {
		h.Close()
		return err
	}
	g.closers = append(g.closers, func() error {
		g.linkWG.Wait() // close closed g.stop before the closers run
		h.Close()
		return nil
	})
	return nil
}

// setLANMTU makes mtu, the LAN interface's (name) new MTU, the LAN port's
// (afxdp.Port.SetMTU: the longest frame it sends) and the LAN device's
// (tundev.PortDevice.SetLANMTU: what it holds decrypted packets to), and
// logs it. A raise takes effect at once: the port's frames are sized at
// start for the largest MTU they hold (afxdp.Port.MaxMTU, 3,822 bytes),
// so nothing is allocated or reopened; before, a raise above the MTU of
// start was refused until a restart. A raise sets the port first, a cut
// the device first, so that the device never makes a frame the port
// drops as too long. An MTU above what a frame holds is logged at
// warning level, with what fails and the fix, and both are held to
// MaxMTU: the kernel drops the LAN's longer frames toward the tunnel at
// the socket (xsk_rx_dropped), as the warning at start says
// (tunnelmtu.CheckFrames). Called by the follower alone.
func (g *Gateway) setLANMTU(name string, mtu int) {
	held, warn := tunnelmtu.HoldLANMTU(mtu, g.lan.MaxMTU())
	if warn != "" {
		g.log.Warn(warn, "interface", name, "mtu", mtu, "held_to", held)
	}
	var errs [2]error
	if held > g.lanDev.LANMTU() {
		errs[0] = g.lan.SetMTU(held)
		errs[1] = g.lanDev.SetLANMTU(held)
	} else {
		errs[1] = g.lanDev.SetLANMTU(held)
		errs[0] = g.lan.SetMTU(held)
	}
	if err := errors.Join(errs[:]...); err != nil {
		g.log.Warn("LAN MTU change not taken", "interface", name, "mtu", mtu, "port_mtu", g.lan.MTU(), "device_mtu", g.lanDev.LANMTU(), "err", err)
		return
	}
	g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", name, "mtu", held)
}
