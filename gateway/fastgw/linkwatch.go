//go:build linux

package fastgw

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wgpio/wgpio/internal/linkfollow"
)

// resubscribeDelay is how long followAddresses (addrs.go) waits before it
// subscribes again after its subscription ended on an error, as the link
// followers do.
const resubscribeDelay = linkfollow.ResubscribeDelay

// followLinks calls handle, on one goroutine, with the attributes of the
// interfaces indexes in the namespace ns, read with g.nlHandle after each
// subscription (reread true) and at each link update of one of them
// (reread false), until done is closed, through internal/linkfollow
// (which renews a subscription that ended on an error and logs it): for
// following the MTU of the side named what ("WAN", "LAN") or the state of
// the exception TUN ("exception TUN"). The deletion of one of them is the
// gateway's failure (linkGone). It returns the first
// subscription's error. Close waits for the goroutine (g.linkWG) after
// closing done, before it closes the netlink handle the goroutine reads
// links with.
func (g *Gateway) followLinks(ns netns.NsHandle, done <-chan struct{}, what string, indexes []int, handle func(a netlink.LinkAttrs, reread bool)) error {
	return linkfollow.Follow(linkfollow.Config{Namespace: ns, Links: g.nlHandle, Log: g.log, What: what, Indexes: indexes, OnLink: handle,
		OnGone: func(index int, name string) { g.linkGone(what, index, name) }}, done, &g.linkWG)
}
