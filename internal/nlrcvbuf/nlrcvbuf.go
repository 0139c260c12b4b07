//go:build linux

package nlrcvbuf

import (
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Size is the receive buffer, in bytes, forced on a notification socket:
// room for a burst of some thousands of notifications before the kernel
// drops them.
const Size = 8 << 20

// Forceable reports whether a netlink socket in the namespace ns may be
// given Size with SO_RCVBUFFORCE, which takes CAP_NET_ADMIN over ns. It
// asks on a socket of its own, which it closes: asked of a subscription's
// own socket instead (netlink's ReceiveBufferForceSize), a refusal leaks
// that socket (vishvananda/netlink v1.3.1 returns the error without
// closing it). Subscriptions are rare (a start, a renewal after an
// overrun), so it asks each time: a capability dropped since, or a
// namespace of another owner, is seen. Without it a subscription keeps
// the kernel's default buffer, capped by net.core.rmem_max.
func Forceable(ns netns.NsHandle) bool {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return false
	}
	defer s.Close()
	return s.SetReceiveBufferSize(Size, true) == nil
}
