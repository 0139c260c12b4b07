package fastgw

import (
	"fmt"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// resubscribeDelay is how long followLinks waits before subscribing again
// after its subscription ended on an error.
const resubscribeDelay = time.Second

// followLinks calls handle, on one goroutine, with the attributes of the
// interfaces indexes, read anew after each subscription (reread true: a
// change made before it is not missed, but changes made and undone while
// no subscription listened are not seen, and handle may have to check
// what they may have left) and at each link update of one of them in
// the namespace ns (reread false), until done is closed: for following
// the MTU of the side named what ("WAN", "LAN") or the state of the
// exception TUN ("exception TUN"). When the subscription ends on an error
// (its socket overflowed in a burst of link events: ENOBUFS), the error is
// logged and followLinks subscribes again after resubscribeDelay; only
// its end at done is silent. It returns the first subscription's error.
// Close waits for the goroutine (g.linkWG) after closing done, before it
// closes the netlink handle the goroutine reads links with.
func (g *Gateway) followLinks(ns netns.NsHandle, done <-chan struct{}, what string, indexes []int, handle func(a netlink.LinkAttrs, reread bool)) error {
	ch, err := g.subscribeLinks(ns, done, what)
	if err != nil {
		return err
	}
	g.linkWG.Add(1)
	go func() {
		defer g.linkWG.Done()
		for {
			for _, i := range indexes {
				if l, err := g.nlHandle.LinkByIndex(i); err == nil {
					handle(*l.Attrs(), true)
				}
			}
			for u := range ch {
				// The link as it is now, not as the update says it
				// was: updates queued while the state above was read
				// are older than it, and taken as they are they turned
				// a followed MTU back for a moment (and logged it).
				if i := u.Attrs().Index; slices.Contains(indexes, i) {
					if l, err := g.nlHandle.LinkByIndex(i); err == nil {
						handle(*l.Attrs(), false)
					}
				}
			}
			for ch = nil; ch == nil; {
				select {
				case <-done:
					return
				case <-time.After(resubscribeDelay):
				}
				if ch, err = g.subscribeLinks(ns, done, what); err != nil {
					g.log.Warn("following the "+what+" link: subscribe again", "err", err)
				} else {
					g.log.Info("following the " + what + " link again after its subscription ended")
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
// the link named what (see followLinks): an error of the
// subscription is logged at warning level, but not the one its own end
// at done causes.
func (g *Gateway) subscribeLinks(ns netns.NsHandle, done <-chan struct{}, what string) (<-chan netlink.LinkUpdate, error) {
	ch := make(chan netlink.LinkUpdate, 16)
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-done: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the "+what+" link", "err", err)
		}
	}}
	if ns.IsOpen() {
		opts.Namespace = &ns
	}
	if err := linkSubscribe(ch, done, opts); err != nil {
		return nil, fmt.Errorf("follow the %s link: %w", what, err)
	}
	return ch, nil
}
