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
// logged, the ended subscription's socket closed (netlink closes it only
// at the subscription's end: one was kept per renewal until Close), and
// followLinks subscribes again after resubscribeDelay; only the end at
// done is silent. It returns the first subscription's error. Close waits
// for the goroutine (g.linkWG) after closing done, before it closes the
// netlink handle the goroutine reads links with.
func (g *Gateway) followLinks(ns netns.NsHandle, done <-chan struct{}, what string, indexes []int, handle func(a netlink.LinkAttrs, reread bool)) error {
	ch, end, err := g.subscribeLinks(ns, what)
	if err != nil {
		return err
	}
	g.linkWG.Add(1)
	go func() {
		defer g.linkWG.Done()
		defer func() {
			if end != nil { // nil: done closed while subscribing again
				end()
				// netlink's reader may be waiting to hand over an
				// update: taken, it finds its socket closed and
				// closes ch.
				for range ch {
				}
			}
		}()
		for {
			for _, i := range indexes {
				if l, err := g.nlHandle.LinkByIndex(i); err == nil {
					handle(*l.Attrs(), true)
				}
			}
		updates:
			for {
				var u netlink.LinkUpdate
				var ok bool
				select {
				case <-done:
					return
				case u, ok = <-ch:
				}
				if !ok {
					break updates
				}
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
			end()
			for ch, end = nil, nil; ch == nil; {
				select {
				case <-done:
					return
				case <-time.After(resubscribeDelay):
				}
				if ch, end, err = g.subscribeLinks(ns, what); err != nil {
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
// current one when ns is not open) until end is called, for following
// the link named what (see followLinks): an error of the subscription is
// logged at warning level, but not the one end causes. end closes the
// subscription's netlink socket, which netlink (v1.3.1) keeps open after
// an error that ended the subscription until then: it must be called
// once, also after the updates channel closed.
func (g *Gateway) subscribeLinks(ns netns.NsHandle, what string) (updates <-chan netlink.LinkUpdate, end func(), err error) {
	ch := make(chan netlink.LinkUpdate, 16)
	stop := make(chan struct{})
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-stop: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the "+what+" link", "err", err)
		}
	}}
	if ns.IsOpen() {
		opts.Namespace = &ns
	}
	if err := linkSubscribe(ch, stop, opts); err != nil {
		close(stop)
		return nil, nil, fmt.Errorf("follow the %s link: %w", what, err)
	}
	return ch, func() { close(stop) }, nil
}
