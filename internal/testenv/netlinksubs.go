//go:build linux

package testenv

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetlinkSubscriptions are the multicast groups (the bound bitmask, such
// as unix.RTMGRP_LINK) of each of the process's netlink sockets that is
// subscribed to some and lives in the network namespace ns, sorted: a
// gateway's followers' subscriptions there, and no other gateway's, whose
// sockets live in their own namespaces (those of a gateway closed a
// moment ago may still be closing). A follower whose subscription ended
// (a socket overflow: ENOBUFS) and that waits to subscribe again has none
// meanwhile; one that kept an ended subscription's socket has one more.
// A count of the process's open files sees neither apart.
func NetlinkSubscriptions(t testing.TB, ns netns.NsHandle) []uint32 {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Fstat(int(ns), &want); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var groups []uint32
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Each of these fails when fd is no socket or was closed meanwhile.
		if dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != unix.AF_NETLINK {
			continue
		}
		sa, err := unix.Getsockname(fd)
		nl, ok := sa.(*unix.SockaddrNetlink)
		if err != nil || !ok || nl.Groups == 0 {
			continue
		}
		nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS) // the socket's namespace (Linux 4.9)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		err = unix.Fstat(nsfd, &st)
		unix.Close(nsfd)
		if err == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			groups = append(groups, nl.Groups)
		}
	}
	slices.Sort(groups)
	return groups
}
