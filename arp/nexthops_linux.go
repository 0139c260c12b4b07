package arp

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// subscribeNexthops follows the namespace's nexthop objects (RTNLGRP
// NEXTHOP, Linux 5.3+; `ip nexthop`): it sends on the returned channel
// (capacity 1, sends coalesced) at each RTM_NEWNEXTHOP or RTM_DELNEXTHOP,
// and closes it when the socket fails (read error: ENOBUFS) or stop is
// closed, which closes the socket. A route through a nexthop object
// (`ip route add ... nhid N`) changes or goes with its nexthop: deleting
// the nexthop removes its routes without an RTM_DELROUTE (remove_nexthop
// in net/ipv4/nexthop.c flushes them, as a link going down does), and with
// net.ipv4.nexthop_compat_mode 0 a replacement notifies no route either;
// the follower lists the table at each. onErr gets a read error unless
// stop was closed first.
func subscribeNexthops(ns netns.NsHandle, stop <-chan struct{}, onErr func(error)) (<-chan struct{}, error) {
	s, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_NEXTHOP)
	if err != nil {
		return nil, fmt.Errorf("nexthop notifications: %w", err)
	}
	ch := make(chan struct{}, 1)
	go func() {
		<-stop
		s.Close()
	}()
	go func() {
		defer close(ch)
		for {
			msgs, from, err := s.Receive()
			if err != nil {
				onErr(fmt.Errorf("nexthop notifications: %w", err))
				return
			}
			if from.Pid != nl.PidKernel {
				continue
			}
			for _, m := range msgs {
				if t := m.Header.Type; t != unix.RTM_NEWNEXTHOP && t != unix.RTM_DELNEXTHOP {
					continue
				}
				select {
				case ch <- struct{}{}:
				default: // a listing is due already
				}
			}
		}
	}()
	return ch, nil
}
