package tundev

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/internal/counts"
)

// TUNDropReason says why a MultiQueueTUN dropped a packet. Write drops
// what the kernel's TUN driver refuses instead of waiting for it
// (drivers/net/tun.c, tun_get_user), as the kernel's own paths drop what a
// full queue or a down device cannot take (a full backlog, netif_rx; a
// full TUN queue, tun_net_xmit) and count it.
type TUNDropReason uint8

// Drop reasons of a MultiQueueTUN.
const (
	// TUNDropFull: write(2) returned EAGAIN (the queue's socket holds its
	// send buffer's worth of packets the kernel has not consumed yet:
	// sk_sndbuf, TUNSETSNDBUF) or ENOBUFS/ENOMEM (no memory for the skb).
	TUNDropFull TUNDropReason = iota
	// TUNDropDown: write(2) returned EIO, the interface is down (ip link
	// set wg0 down; tun_get_user checks IFF_UP), or EBADFD, it was
	// deleted (ip link del wg0 detaches the queues: tun_chr_write_iter).
	TUNDropDown
	// TUNDropMalformed: write(2) returned EINVAL: not an IPv4 or IPv6
	// packet (IFF_NO_PI: the version nibble selects the protocol) or
	// shorter than the kernel accepts; or, with SetAllowed, a packet read
	// from the kernel shorter than its IP header or neither IPv4 nor
	// IPv6.
	TUNDropMalformed
	// TUNDropWriteError: write(2) failed with any other errno.
	TUNDropWriteError
	// TUNDropTooBig: a packet read from the kernel larger than Read's
	// buffer past offset.
	TUNDropTooBig
	// TUNDropNoRoute: a packet read from the kernel to a unicast
	// destination no allowed IP holds (SetAllowed), which wireguard-go
	// would drop without a counter.
	TUNDropNoRoute
	// TUNDropHostMulticast: a packet read from the kernel to a multicast
	// destination no allowed IP holds (SetAllowed): the host's own IPv6
	// router solicitations and MLD reports on the TUN, which grow on a
	// healthy gateway (the fast path's host_multicast).
	TUNDropHostMulticast
	// TUNDropKernelQueueFull: packets the kernel dropped on their way
	// into the TUN, before Read: the queue to the reader was full (the
	// reader fell behind) or had no reader (tun_net_xmit,
	// drivers/net/tun.c). The kernel counts them as the interface's TX
	// drops (ip -s link show); Stats reads that count.
	TUNDropKernelQueueFull
	// TUNDropClosed: packets read from the kernel that no Read took
	// before Close: those a reader held and those waiting for Read (a
	// batch Read began is still returned after Close).
	TUNDropClosed

	NumTUNDropReasons
)

var tunDropNames = [NumTUNDropReasons]string{"full", "down", "malformed", "write_error", "too_big", "no_route", "host_multicast", "kernel_queue_full", "closed"}

// String returns the reason's snake-case name.
func (r TUNDropReason) String() string { return counts.Name(tunDropNames[:], r) }

const _ = counts.MaxReasons - NumTUNDropReasons // at most MaxReasons reasons

// TUNDropCounts counts a MultiQueueTUN's drops by reason, indexed by
// TUNDropReason (JSON: the nonzero counts by name).
type TUNDropCounts = counts.Counts[TUNDropReason]

// TUNStats are a MultiQueueTUN's counters since it was opened (the
// kernel's kernel_queue_full since the interface was made).
type TUNStats struct {
	RXPackets uint64        `json:"rx_packets"` // packets Read returned (the kernel sent them into the TUN)
	TXPackets uint64        `json:"tx_packets"` // packets Write handed to the kernel
	Drops     TUNDropCounts `json:"drops"`
	// ICMPErrors, ICMPSuppressed and ICMPSendErrors count the host
	// unreachable answers to no_route drops (AnswerNoRoute): sent, held
	// back by the rate limits, refused by the kernel's sendto(2).
	ICMPErrors     uint64 `json:"icmp_errors"`
	ICMPSuppressed uint64 `json:"icmp_suppressed"`
	ICMPSendErrors uint64 `json:"icmp_send_errors"`
}

// tunCounters are written by Read's caller (rx and its drops) and by Write's
// callers (tx, the write drops), once per call each: rx and tx are on
// lines of their own, so that reader and writers on two CPUs do not take
// each other's line once per batch.
type tunCounters struct {
	rx    atomic.Uint64
	_     [56]byte
	tx    atomic.Uint64
	_     [56]byte
	drops counts.Atomic[TUNDropReason]
	// icmp, icmpSuppressed and icmpSendErrors are Read's (AnswerNoRoute).
	icmp, icmpSuppressed, icmpSendErrors atomic.Uint64
}

// stats returns a snapshot of c.
func (c *tunCounters) stats() TUNStats {
	return TUNStats{RXPackets: c.rx.Load(), TXPackets: c.tx.Load(), Drops: c.drops.Load(),
		ICMPErrors: c.icmp.Load(), ICMPSuppressed: c.icmpSuppressed.Load(), ICMPSendErrors: c.icmpSendErrors.Load()}
}
