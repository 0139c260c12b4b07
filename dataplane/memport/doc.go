// Package memport is an in-process dataplane backend: a pair of ports joined
// by a virtual wire, for tests and for benchmarks of the software path
// without a kernel.
//
// NewPair returns ports a and b with the same number of queues. A frame that
// a transmits on any TX queue arrives on one of b's RX queues, and the other
// way round. The RX queue is chosen like a NIC's receive-side scaling would:
// a hash of the frame's outer 5-tuple (see RSSQueue). Between each TX queue
// of one port and each RX queue of the other lies a single-producer,
// single-consumer ring of descriptors shaped like an AF_XDP ring
// (Documentation/networking/af_xdp.rst): power-of-2 size, free-running 32-bit
// producer and consumer indexes, cached copies of the other side's index,
// and one atomic store per ring per burst. Nothing is locked per packet.
//
// Each port has its own dataplane.Pool, or the two share one
// (Config.SharedPool). A frame crosses the wire without a copy when it already lives
// in the receiver's pool; otherwise the transmitting queue copies it into a
// buffer of the receiver's pool, frees the original and counts a copy. This
// is the "frame of another pool" rule of package dataplane.
//
// The RX halves' WaitFDs are eventfds (on systems other than Linux, the
// read ends of pipes) written in the style of AF_XDP's need_wakeup flag
// (Linux commit 77cd0d7b3f25, "xsk: add support for need_wakeup flag in
// AF_XDP rings"): a transmitter writes the eventfd only after the receiver
// armed it (RX.Arm), so a busy receiver costs the transmitter no system
// call. The RX halves are also dataplane.Notifiers: a dataplane.Waiter
// over memport halves only gives them a Go channel, and the transmitter
// that takes the arming sends on it instead of writing the eventfd, so
// that the waiting goroutine parks in the Go scheduler and sleeping and
// waking cost no system call at all.
//
// The package is portable (Unix systems; a pipe where Linux has an
// eventfd): a program built for macOS or FreeBSD runs fastpath over it.
//
// Bad input is dropped and counted by reason, never a panic: a frame longer
// than MTU + 14 bytes (+ 4 for an 802.1Q tag) on Transmit (DropTooLong at
// the transmitter), and on Receive a runt shorter than an Ethernet header
// (DropRunt), a frame too long for the MTU (DropTooLong) or a descriptor
// whose address or length lies outside the pool (DropBadDescriptor; see
// Port.CorruptNextDescriptor for the test hook that makes one).
package memport
