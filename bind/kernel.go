package bind

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/counts"
)

// KernelQueueLen is how many datagrams of ReceiveKernel the Bind holds at
// most, over all its queues, until a ReceiveFunc hands them to
// wireguard-go; one more is dropped (DropKernelQueueFull). Each waits in a
// buffer of the Bind's, reused, which grows to the longest datagram it
// held: the queue holds at most KernelQueueLen × 65,535 bytes (8 MiB),
// KernelQueueLen × the longest WireGuard datagram in practice.
const KernelQueueLen = 128

// kernelSlot is a datagram of ReceiveKernel: its payload in buf (owned by
// the slot, reused), its source and the local address it was sent to.
type kernelSlot struct {
	buf   []byte
	src   netip.AddrPort
	local netip.Addr
}

// kernelQueues are ReceiveKernel's datagrams waiting for the receive
// functions: the free slots, KernelQueueLen of them (the only ones, so a
// send on a full channel never blocks), and a channel of waiting slots
// per queue of the port, taken by that queue's ReceiveFunc. wake are the
// waiters of the open generation's receive functions (nil while closed),
// rung after a datagram is queued; wakeMu guards it, so that no Ring
// races with a waiter's Close (dataplane.Waiter).
type kernelQueues struct {
	free  chan *kernelSlot
	ready []chan *kernelSlot
	drops counts.Atomic[DropReason]

	wakeMu sync.RWMutex
	wake   []*dataplane.Waiter
}

// init makes k's slots and channels for a port of queues queues.
func (k *kernelQueues) init(queues int) {
	k.free, k.ready = make(chan *kernelSlot, KernelQueueLen), make([]chan *kernelSlot, queues)
	for range KernelQueueLen {
		k.free <- new(kernelSlot)
	}
	for i := range k.ready {
		k.ready[i] = make(chan *kernelSlot, KernelQueueLen)
	}
}

// setWake makes ws (one per queue; nil: none) the waiters ReceiveKernel
// rings.
func (k *kernelQueues) setWake(ws []*dataplane.Waiter) {
	k.wakeMu.Lock()
	k.wake = ws
	k.wakeMu.Unlock()
}

// ReceiveKernel hands wireguard-go a datagram that reached the WAN outside
// the port: msg, the UDP payload, from src to dst, received by a kernel
// socket on the Bind's address and port (internal/kernelsock). Those are
// the datagrams the XDP filter leaves to the kernel: IP fragments, which
// the kernel reassembles (a peer whose path MTU is below its datagrams'
// size sends them fragmented, as Linux's WireGuard and Send do), and
// datagrams with IPv4 options or IPv6 extension headers. It copies msg
// into a slot of a bounded queue (KernelQueueLen) and wakes the
// ReceiveFunc of the queue src hashes to, which returns it in its next
// batch, counted in Stats.RXPackets and Stats.FromKernel, as a Linux
// wg0's UDP socket receives the reassembled datagram. It reports whether
// the datagram was queued; it never blocks and allocates only to grow a
// slot's buffer to a longer datagram than it held. Dropped and counted:
// a datagram to an address or port not the Bind's (DropNotOurs: a socket
// of a listen port just moved from), one Config.Screen refuses (as on the
// port), one that finds the queue full (DropKernelQueueFull: wireguard-go
// does not keep up); one longer than wireguard-go's buffer is dropped when
// taken (DropTooBig). Datagrams queued while the Bind is closed wait for
// the next Open. Safe for concurrent use.
func (b *Bind) ReceiveKernel(src, dst netip.AddrPort, msg []byte) bool {
	k := &b.kq
	local := b.local.Load()
	d := dst.Addr().Unmap()
	if dst.Port() != uint16(b.port.Load()) || (d != local.v4 && d != local.v6 && !local.has(d)) {
		k.drops[DropNotOurs].Add(1)
		return false
	}
	if b.cfg.Screen {
		if why, ok := screen(msg); !ok {
			k.drops[why].Add(1)
			return false
		}
	}
	var s *kernelSlot
	select {
	case s = <-k.free:
	default:
		k.drops[DropKernelQueueFull].Add(1)
		return false
	}
	src = netip.AddrPortFrom(src.Addr().Unmap().WithZone(""), src.Port())
	s.buf = append(s.buf[:0], msg...)
	s.src, s.local = src, d
	q := 0
	if n := len(k.ready); n > 1 {
		// One source, one queue: its datagrams stay in order.
		a := src.Addr().As16()
		h := (binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(a[:8]) ^ uint64(src.Port())) * 0x9e3779b97f4a7c15
		q = int(uint32(h>>32) % uint32(n))
	}
	k.ready[q] <- s // never blocks: there are KernelQueueLen slots
	k.wakeMu.RLock()
	if q < len(k.wake) {
		k.wake[q].Ring()
	}
	k.wakeMu.RUnlock()
	return true
}

// CountKernelSocketDrops makes drops the count of DropKernelSocketFull:
// the datagrams the host kernel dropped since the start at the sockets
// that feed ReceiveKernel (kernelsock.Set.Drops), cumulative, read at
// each Stats, after Close too (the sockets' last count). drops must be
// safe for concurrent use and quick (it runs in Stats, never per
// datagram); nil counts none. Safe for concurrent use.
func (b *Bind) CountKernelSocketDrops(drops func() uint64) {
	if drops == nil {
		b.kernelDrops.Store(nil)
		return
	}
	b.kernelDrops.Store(&drops)
}

// takeKernel appends the datagrams of ReceiveKernel waiting for this
// queue to packets[n:want] (their sizes and endpoints with them) and
// returns the new count; the slots go back to the free list.
func (r *rxQueue) takeKernel(packets [][]byte, sizes []int, eps []conn.Endpoint, n, want int) int {
	free := r.b.kq.free
	for n < want {
		var s *kernelSlot
		select {
		case s = <-r.kernel:
		default:
			return n
		}
		if len(s.buf) > len(packets[n]) {
			r.ctr.drops[DropTooBig].Add(1)
		} else {
			sizes[n] = copy(packets[n], s.buf)
			eps[n] = r.endpoint(s.src, s.local)
			r.ctr.fromKernel.Add(1)
			n++
		}
		free <- s
	}
	return n
}
