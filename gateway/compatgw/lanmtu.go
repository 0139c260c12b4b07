//go:build linux

package compatgw

import (
	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/linkfollow"
)

// followLANMTU follows the MTU of the LAN interface (index; the link the
// LAN port is open on) until Close, through internal/linkfollow as
// fast-path mode follows it (fastgw's watchLANMTU): each change is handed
// to the LAN device (tundev.PortDevice.SetLANMTU), so that decrypted
// packets over the new MTU are fragmented or answered with
// "fragmentation needed" / "packet too big" (too_big) as a Linux router
// checks them against the outgoing device's MTU of the moment, and logged
// at info level. An MTU above the port's at start (which its frames
// cannot exceed) is logged at warning level and the port's applies. A
// link update that leaves the MTU as it was changes nothing. The link
// going down (warning: what is lost, and the fix) or coming back (info)
// is logged, as in fast-path mode (linkfollow.StateLog). It reads
// links with a netlink handle of its own, opened here in the calling
// thread's namespace (Start's) and closed by Close after the follower
// ended.
func (g *Gateway) followLANMTU(index int) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	// mtu is the device's: the port's at its opening, not the link's
	// now, which may differ already (Follow reads it after subscribing,
	// and that change is handed on like any other).
	mtu := g.lanDev.LANMTU()
	states := &linkfollow.StateLog{Log: g.log, What: "LAN",
		Counted: "wgpio stats counts it as the LAN device's link_down drops without carrier, tx_full once its TX ring is full when set down"}
	err = linkfollow.Follow(linkfollow.Config{Namespace: g.nsHandle, Links: h, Log: g.log, What: "LAN", Indexes: []int{index}, OnLink: func(a netlink.LinkAttrs, _ bool) {
		states.Note(a)
		if a.MTU == mtu {
			return
		}
		mtu = a.MTU
		if err := g.lanDev.SetLANMTU(mtu); err != nil {
			portMTU := g.lan.MTU()
			g.log.Warn("LAN MTU changed beyond what the LAN port carries: decrypted packets are held to the port's MTU of start (restart the gateway to take the new one)",
				"interface", a.Name, "mtu", mtu, "port_mtu", portMTU, "err", err)
			if mtu > portMTU {
				_ = g.lanDev.SetLANMTU(portMTU) // the port's own MTU: valid
			}
			return
		}
		g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", a.Name, "mtu", mtu)
	}}, g.stop, &g.linkWG)
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
