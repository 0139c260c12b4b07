package fastgw

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// watchLANMTU follows the MTU of the LAN port's interface (the trunk the
// AF_XDP port is open on, whose MTU the engine read at start) until
// g.tableDone is closed: each change is handed to the engine
// (fastpath.Engine.SetLANMTU), so that decrypted packets over the new MTU
// are fragmented or answered with "fragmentation needed" (lan_too_big) as
// a Linux router checks them against the outgoing device's MTU of the
// moment, rather than sent whole for the kernel to drop without a count;
// and logged at info level. A link update that leaves the MTU as it was
// changes nothing. The engine must be running.
func (g *Gateway) watchLANMTU() error {
	l, err := g.nlHandle.LinkByName(g.lanSide.trunk)
	if err != nil {
		return fmt.Errorf("follow the LAN MTU: %w", err)
	}
	// mtu is the engine's: the port's at its opening (New read
	// Config.LAN.MTU()), not the link's now, which may differ already.
	index, mtu := l.Attrs().Index, g.lan.MTU()
	ch, err := g.subscribeLinks(g.nsHandle, g.tableDone, "LAN")
	if err != nil {
		return err
	}
	// A change between the port's opening and the subscription is
	// caught here.
	if l, err := g.nlHandle.LinkByIndex(index); err == nil && l.Attrs().MTU != mtu {
		mtu = l.Attrs().MTU
		g.engine.SetLANMTU(mtu)
		g.log.Info("LAN MTU changed while the gateway started; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", l.Attrs().Name, "mtu", mtu)
	}
	go func() {
		for u := range ch {
			a := u.Attrs()
			if a.Index != index || a.MTU == mtu {
				continue
			}
			mtu = a.MTU
			g.engine.SetLANMTU(mtu)
			g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", a.Name, "mtu", mtu)
		}
	}()
	return nil
}

// subscribeLinks subscribes to the link updates of the namespace ns (the
// current one when ns is not open) until done is closed, for following
// the MTU of the side named what ("WAN", "LAN"): an error of the
// subscription is logged at warning level, but not the one its own end
// at done causes.
func (g *Gateway) subscribeLinks(ns netns.NsHandle, done <-chan struct{}, what string) (<-chan netlink.LinkUpdate, error) {
	ch := make(chan netlink.LinkUpdate, 16)
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-done: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the "+what+" MTU", "err", err)
		}
	}}
	if ns.IsOpen() {
		opts.Namespace = &ns
	}
	if err := netlink.LinkSubscribeWithOptions(ch, done, opts); err != nil {
		return nil, fmt.Errorf("follow the %s MTU: %w", what, err)
	}
	return ch, nil
}
