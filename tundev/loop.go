package tundev

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/header"
)

// loopSlots is how many packets the loop queue holds between two Reads:
// two of wireguard-go's batches.
const loopSlots = 2 * PortBatchSize

// loopQueue holds packets that go from Write's side back to Read's, into
// the tunnel again without touching the LAN: decrypted packets to another
// peer's (or the same peer's) allowed IPs (peer to peer), and the time
// exceeded and parameter problem errors answering decrypted packets.
// Slots of a fixed size (the tunnel MTU, at least an ICMP error's; Write
// fragments or answers a peer-to-peer packet over the tunnel MTU,
// lanmtu.go), allocated once: push and pop copy and allocate nothing. A
// full queue drops the packet (no_buffer), as a full TUN queue would.
//
// Concurrency: mu guards every field but n, which push and pop update under
// mu and Read loads without it, so that Read costs one atomic load per
// turn while the queue is empty. push (one lock per Write batch) and
// icmpError (one per error, rate-limited) are safe for concurrent use
// (Write's goroutines); pop is Read's.
type loopQueue struct {
	mu   sync.Mutex
	buf  []byte // loopSlots slots of slot bytes
	slot int
	size [loopSlots]int
	head int // oldest packet's slot
	n    atomic.Int32
}

// newLoopQueue returns a queue for packets of up to tunnelMTU bytes (and
// ICMP errors; no IP packet is longer than 65,535 bytes).
func newLoopQueue(tunnelMTU int) loopQueue {
	slot := min(max(tunnelMTU, header.ICMPv6ErrorMaxLen), 0xffff)
	return loopQueue{buf: make([]byte, loopSlots*slot), slot: slot}
}

// reserve returns the next free slot, with mu held, or nil (mu released)
// when the queue is full.
func (q *loopQueue) reserve() []byte {
	q.mu.Lock()
	n := int(q.n.Load())
	if n == loopSlots {
		q.mu.Unlock()
		return nil
	}
	i := (q.head + n) % loopSlots
	return q.buf[i*q.slot : (i+1)*q.slot]
}

// commit queues the slot reserve returned with its first size bytes, wakes
// Read and releases mu.
func (q *loopQueue) commit(d *PortDevice, size int) {
	q.size[(q.head+int(q.n.Load()))%loopSlots] = size
	q.n.Add(1)
	q.mu.Unlock()
	d.w.Ring()
}

// push queues a copy of each bufs[i][offset:] marked in mark (at most the
// tunnel MTU: Write checked) for Read, in order, counting them as peer to
// peer; those past a full queue are dropped (no_buffer). One lock and one
// wake-up per call.
func (q *loopQueue) push(d *PortDevice, bufs [][]byte, offset int, mark []bool) {
	q.mu.Lock()
	n, full := int(q.n.Load()), 0
	for i, m := range mark {
		if !m {
			continue
		}
		if n == loopSlots {
			full++
			continue
		}
		j := (q.head + n) % loopSlots
		q.size[j] = copy(q.buf[j*q.slot:(j+1)*q.slot], bufs[i][offset:])
		n++
	}
	added := n - int(q.n.Load())
	q.n.Store(int32(n))
	q.mu.Unlock()
	if added > 0 {
		d.ctr.peerToPeer.Add(uint64(added))
		d.w.Ring()
	}
	if full > 0 {
		d.ctr.drops[PortDropNoBuffer].Add(uint64(full))
	}
}

// pushFragments queues the fragments of pkt, a peer-to-peer IPv4 packet
// without DF over the tunnel MTU (Write checked both), cut to mtu bytes
// (header.IPv4Fragmenter; pkt's header is rewritten in place as fragment
// 0), in order, after the packets queued before, counting pkt as peer to
// peer and fragmented. All or none: a packet whose fragments do not all
// fit the free slots is dropped (no_buffer, as push drops a packet past a
// full queue), one whose header leaves no room for 8 data bytes in mtu as
// too_big, one whose pieces would start past the largest fragment offset
// as malformed (fragmentDrop). One lock and one wake-up.
func (q *loopQueue) pushFragments(d *PortDevice, pkt []byte, mtu int) {
	var fr header.IPv4Fragmenter
	if r := fr.Reset(pkt, mtu); r != header.OK {
		d.fragmentDrop(r)
		return
	}
	if fr.Len(0) > q.slot {
		d.ctr.drops[PortDropTooBig].Add(1)
		return
	}
	count := fr.Count()
	q.mu.Lock()
	n := int(q.n.Load())
	if loopSlots-n < count {
		q.mu.Unlock()
		d.ctr.drops[PortDropNoBuffer].Add(1)
		return
	}
	// Fragments 1 to count−1 first: fragment 0 is pkt's header
	// rewritten in place (PutFirst), after which Put would read it.
	for i := 1; i < count; i++ {
		j := (q.head + n + i) % loopSlots
		q.size[j] = fr.Put(q.buf[j*q.slot:(j+1)*q.slot], i)
	}
	j := (q.head + n) % loopSlots
	q.size[j] = copy(q.buf[j*q.slot:(j+1)*q.slot], pkt[:fr.PutFirst()])
	q.n.Store(int32(n + count))
	q.mu.Unlock()
	d.ctr.peerToPeer.Add(1)
	d.ctr.fragmented.Add(1)
	d.w.Ring()
}

// icmpError queues the error e about pkt from our tunnel address from
// (icmpSources.tunnelFrom), and reports whether it did (false: the queue is full,
// counted as a no_buffer drop as push counts a packet, or no error may
// answer pkt).
func (q *loopQueue) icmpError(d *PortDevice, pkt []byte, from netip.Addr, e icmpError) bool {
	b := q.reserve()
	if b == nil {
		d.ctr.drops[PortDropNoBuffer].Add(1)
		return false
	}
	n, r := e.put(room(b, d.cfg.MTU), from, pkt)
	if r != header.OK {
		q.mu.Unlock()
		return false
	}
	q.commit(d, n)
	return true
}

// pop copies waiting packets, oldest first, into bufs[i][offset:], sets
// sizes[i] and returns how many; those that do not fit bufs wait for the
// next call. A packet longer than its buffer is dropped (too_big).
func (q *loopQueue) pop(d *PortDevice, bufs [][]byte, sizes []int, offset int) int {
	if q.n.Load() == 0 || len(bufs) == 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	k := 0
	for q.n.Load() > 0 && k < len(bufs) {
		s := q.size[q.head]
		p := q.buf[q.head*q.slot : q.head*q.slot+s]
		q.head = (q.head + 1) % loopSlots
		q.n.Add(-1)
		if len(bufs[k])-offset < s {
			d.ctr.drops[PortDropTooBig].Add(1)
			continue
		}
		sizes[k] = copy(bufs[k][offset:], p)
		k++
	}
	return k
}
