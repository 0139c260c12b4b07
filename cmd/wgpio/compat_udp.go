//go:build linux

package main

import (
	"errors"
	"sync/atomic"
	"syscall"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/internal/counts"
)

// udpDropReason says why compat-mqtun's UDP bind (stock wireguard-go's
// conn.StdNetBind over the kernel's UDP sockets) failed to send.
type udpDropReason uint8

// Reasons of a failed send, by the errno of sendmsg/sendmmsg (udp(7)).
const (
	// udpDropNoRoute: no route to the endpoint (ENETUNREACH,
	// EHOSTUNREACH), no source address for it (EADDRNOTAVAIL), or no
	// socket of its family (EAFNOSUPPORT).
	udpDropNoRoute udpDropReason = iota
	// udpDropRefused: a netfilter rule refused it (EPERM, EACCES).
	udpDropRefused
	// udpDropTooBig: larger than the path allows (EMSGSIZE).
	udpDropTooBig
	// udpDropFull: no buffer space (ENOBUFS, EAGAIN).
	udpDropFull
	// udpDropSendError: any other error.
	udpDropSendError

	numUDPDropReasons
)

var udpDropNames = [numUDPDropReasons]string{"no_route", "refused", "too_big", "full", "send_error"}

// String returns the reason's snake-case name.
func (r udpDropReason) String() string { return counts.Name(udpDropNames[:], r) }

const _ = counts.MaxReasons - numUDPDropReasons // at most MaxReasons reasons

// UDPStats are compat-mqtun's counters of the kernel's UDP sockets under
// stock wireguard-go: datagrams received and sent, and sends that failed,
// by reason.
type UDPStats struct {
	RXPackets uint64                       `json:"rx_packets"` // datagrams handed to wireguard-go
	TXPackets uint64                       `json:"tx_packets"` // datagrams the kernel took
	Drops     counts.Counts[udpDropReason] `json:"drops"`
}

// countingBind is a conn.Bind that counts what the Bind it wraps receives
// and sends, and the datagrams of each send that fails, by errno:
// wireguard-go logs a failed send at debug level and counts nothing. A
// failed send counts its whole batch (StdNetBind does not say how many of
// a batch went before the error; with UDP GSO a batch to one endpoint is
// one sendmsg). One atomic add per batch; safe for concurrent use.
type countingBind struct {
	conn.Bind
	rx, tx atomic.Uint64
	drops  counts.Atomic[udpDropReason]
}

// Open opens the wrapped Bind and wraps its receive functions to count.
func (b *countingBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	for i, f := range fns {
		fns[i] = func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
			n, err := f(packets, sizes, eps)
			b.rx.Add(uint64(n))
			return n, err
		}
	}
	return fns, actual, err
}

// Send sends bufs to ep through the wrapped Bind and counts them.
func (b *countingBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	err := b.Bind.Send(bufs, ep)
	serr := err
	var gso conn.ErrUDPGSODisabled
	if errors.As(err, &gso) {
		// GSO turned off and the batch sent again: RetryErr is the
		// retry's outcome.
		serr = gso.RetryErr
	}
	if serr == nil {
		b.tx.Add(uint64(len(bufs)))
	} else {
		b.drops.Add(udpDropOf(serr), uint64(len(bufs)))
	}
	return err
}

// udpDropOf is the reason of a send that failed with err.
func udpDropOf(err error) udpDropReason {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return udpDropSendError
	}
	switch errno {
	case syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.EADDRNOTAVAIL, syscall.EAFNOSUPPORT:
		return udpDropNoRoute
	case syscall.EPERM, syscall.EACCES:
		return udpDropRefused
	case syscall.EMSGSIZE:
		return udpDropTooBig
	case syscall.ENOBUFS, syscall.EAGAIN:
		return udpDropFull
	}
	return udpDropSendError
}

// Stats returns a snapshot of the counters.
func (b *countingBind) Stats() UDPStats {
	return UDPStats{RXPackets: b.rx.Load(), TXPackets: b.tx.Load(), Drops: b.drops.Load()}
}
