//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"
)

// fragBind is a conn.Bind (compat-mqtun's: stock wireguard-go's
// conn.StdNetBind over the kernel's UDP sockets) whose outer packets
// carry no DF and are fragmented by the kernel when over the path MTU, as
// Linux's WireGuard sends them (it sets ignore_df on every outer packet
// and leaves DF clear; README, "MTU"). Stock wireguard-go's sockets keep
// the kernel's default, path MTU discovery (IP_PMTUDISC_WANT): an IPv4
// datagram that fits the route's MTU leaves with DF, so a smaller MTU
// further on the path drops it (and, where the "fragmentation needed" is
// filtered, every one after it) instead of fragmenting it; and a batch
// sent with UDP GSO (UDP_SEGMENT, udp(7)), which StdNetBind uses for
// several datagrams to one peer, fails whole with EMSGSIZE when its
// segments are over the route's MTU, of either family, whatever the
// socket's options (the kernel segments but never fragments a GSO
// send).
//
// So fragBind:
//   - after each Open (wireguard-go's start, and every move of the
//     listen port or bring-up, which close the sockets and open new
//     ones) sets on the new sockets IP_MTU_DISCOVER = IP_PMTUDISC_DONT
//     (IPv4; ip(7): DF never set, the kernel fragments a datagram over
//     the route's MTU, the path MTU it learned included, which is what
//     the kernel's WireGuard gets with ignore_df on a socket of path MTU
//     discovery; IP_PMTUDISC_OMIT, without DF too, would fragment at the
//     interface's MTU and ignore the path MTU the kernel learned, a
//     defence of DNS servers against forged "fragmentation needed")
//     and IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DONT with IPV6_DONTFRAG = 0
//     (IPv6; ipv6(7): the source fragments at the path MTU, RFC 8200
//     §4.5, and keeps taking "packet too big" (RFC 8201), which OMIT
//     would ignore: IPv6 routers never fragment);
//   - when a Send of several datagrams fails with EMSGSIZE, stops using
//     batches of several datagrams for that family (each datagram is a
//     Send of its own, which StdNetBind sends without UDP_SEGMENT, so the
//     kernel fragments it) until the next Open, and sends the batch again
//     that way, as wireguard-go turns GSO off for good and sends the
//     batch again when the kernel answers EIO. The datagrams of the
//     batch that left before the failed one are sent twice: the peer
//     drops the copies as replays (whitepaper §5.4.6).
//
// StdNetBind has no way to reach its sockets on Linux
// (PeekLookAtSocketFd is Android's): fragBind finds them among the
// process's file descriptors (/proc/self/fd) as its UDP sockets bound to
// the port Open returned, one per family (IPv6 only: wireguard-go sets
// IPV6_V6ONLY). A socket option that cannot be set is logged (the
// sockets then keep the kernel's default) and does not fail the Open.
// Safe for concurrent use, as the Bind it wraps.
type fragBind struct {
	conn.Bind
	log *slog.Logger
	// single[0] (IPv4) and single[1] (IPv6): send each datagram on its
	// own (set by a batch's EMSGSIZE, cleared by Open).
	single [2]atomic.Bool
}

// Open opens the wrapped Bind and sets its sockets' options (fragBind).
func (b *fragBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	if err != nil {
		return fns, actual, err
	}
	b.single[0].Store(false)
	b.single[1].Store(false)
	if err := setNoDF(actual); err != nil {
		b.log.Warn("outer packets over the path MTU may be lost instead of fragmented (IPv4 ones carry DF)", "port", actual, "err", err)
	}
	return fns, actual, nil
}

// Send sends bufs to ep through the wrapped Bind; a batch of several
// datagrams that fails with EMSGSIZE is sent again a datagram at a time,
// as are the family's later batches (fragBind).
func (b *fragBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	fam := 0
	if ep.DstIP().Is6() {
		fam = 1
	}
	if len(bufs) < 2 || !b.single[fam].Load() {
		err := b.Bind.Send(bufs, ep)
		if len(bufs) < 2 || !errors.Is(err, syscall.EMSGSIZE) {
			return err
		}
		if !b.single[fam].Swap(true) {
			b.log.Info("outer packets over the path MTU in a batch (EMSGSIZE from UDP GSO): sending each on its own from now on, for the kernel to fragment, until the listen port moves",
				"family", [2]string{"IPv4", "IPv6"}[fam], "endpoint", ep.DstToString(), "datagrams", len(bufs))
		}
	}
	var first error
	for i := range bufs {
		if err := b.Bind.Send(bufs[i:i+1], ep); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// setNoDF sets the fragBind options on the process's UDP sockets bound to
// port: IPv4 ones IP_PMTUDISC_DONT, IPv6 ones IPV6_PMTUDISC_DONT and
// IPV6_DONTFRAG off. It fails if it finds none, or one's options cannot
// be set. A descriptor closed and reused by another goroutine while it
// looks is skipped (its socket is checked again just before the
// options are set).
func setNoDF(port uint16) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list the sockets: %w", err)
	}
	found := 0
	var errs []error
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		domain, ok := udpSocketOn(fd, port)
		if !ok {
			continue
		}
		found++
		switch domain {
		case unix.AF_INET:
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT)
		case unix.AF_INET6:
			err = errors.Join(
				unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DONT),
				unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 0))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("UDP socket %d: %w", fd, err))
		}
	}
	if found == 0 {
		return fmt.Errorf("no UDP socket of the process is bound to port %d", port)
	}
	return errors.Join(errs...)
}

// udpSocketOn says whether fd is a UDP socket bound to port, and its
// address family (unix.AF_INET or unix.AF_INET6).
func udpSocketOn(fd int, port uint16) (domain int, ok bool) {
	if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || p != unix.IPPROTO_UDP {
		return 0, false
	}
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, false
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, false
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return domain, a.Port == int(port)
	case *unix.SockaddrInet6:
		return domain, a.Port == int(port)
	}
	return 0, false
}
