package fastgw

import (
	"fmt"
	"time"

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
	// Config.LAN.MTU()), not the link's now, which may differ already
	// (followLinks reads it after subscribing, and that change is
	// handed on like any other).
	index, mtu := l.Attrs().Index, g.lan.MTU()
	return g.followLinks(g.nsHandle, g.tableDone, "LAN", []int{index}, func(a netlink.LinkAttrs) {
		if a.Index != index || a.MTU == mtu {
			return
		}
		mtu = a.MTU
		g.engine.SetLANMTU(mtu)
		g.log.Info("LAN MTU changed; decrypted packets over it are fragmented or answered with fragmentation needed", "interface", a.Name, "mtu", mtu)
	})
}

// resubscribeDelay is how long followLinks waits before subscribing again
// after its subscription ended on an error.
const resubscribeDelay = time.Second

// followLinks calls handle, on one goroutine, with the attributes of each
// link update of the namespace ns until done is closed, for following the
// MTU of the side named what ("WAN", "LAN"), and with those of the
// interfaces indexes as read after each subscription, so that a change
// made before it is not missed. When the subscription ends on an error
// (its socket overflowed in a burst of link events: ENOBUFS), the error is
// logged and followLinks subscribes again after resubscribeDelay; only
// its end at done is silent. It returns the first subscription's error.
func (g *Gateway) followLinks(ns netns.NsHandle, done <-chan struct{}, what string, indexes []int, handle func(netlink.LinkAttrs)) error {
	ch, err := g.subscribeLinks(ns, done, what)
	if err != nil {
		return err
	}
	go func() {
		for {
			for _, i := range indexes {
				if l, err := g.nlHandle.LinkByIndex(i); err == nil {
					handle(*l.Attrs())
				}
			}
			for u := range ch {
				handle(*u.Attrs())
			}
			for ch = nil; ch == nil; {
				select {
				case <-done:
					return
				case <-time.After(resubscribeDelay):
				}
				if ch, err = g.subscribeLinks(ns, done, what); err != nil {
					g.log.Warn("following the "+what+" MTU: subscribe again", "err", err)
				} else {
					g.log.Info("following the " + what + " MTU again after its subscription ended")
				}
			}
		}
	}()
	return nil
}

// linkSubscribe is netlink's; tests end subscriptions early through it.
var linkSubscribe = netlink.LinkSubscribeWithOptions

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
	if err := linkSubscribe(ch, done, opts); err != nil {
		return nil, fmt.Errorf("follow the %s MTU: %w", what, err)
	}
	return ch, nil
}
