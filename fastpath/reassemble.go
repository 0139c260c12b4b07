package fastpath

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/reassembly"
)

// ReassemblyStats are the counters of the engine's reassembler
// (Config.Reassemble): fragments taken, datagrams reassembled, datagrams
// in progress and the bytes they hold, and dropped fragments by reason
// (package internal/reassembly: bad_header, tiny_first, too_big,
// duplicate, overlap, inconsistent, too_many_holes, timeout, table_full,
// memory_full, and for a reassembled datagram refused: udp_malformed,
// udp_checksum, not_for_us).
type ReassemblyStats = reassembly.Stats

// Reassembly queue sizes: fragQueueLen fragments of at most fragBufLen
// bytes (an AF_XDP frame's IP packet fits) wait for the reassembler at
// once, 1 MiB preallocated.
const (
	fragQueueLen = 256
	fragBufLen   = 4096
)

// reassembler is the engine's reassembly of the WireGuard datagrams that
// reach the WAN ports as IP fragments (Config.Reassemble, the owned
// address mode, whose kernel has no address to reassemble them for). The
// fragments of one datagram may arrive on different RX queues (RSS hashes
// IPv4 fragments, which carry no ports, by addresses alone, but a NIC may
// hash a first fragment, or an IPv6 one, otherwise than the rest), so no
// worker can reassemble alone: each copies the fragments it receives
// into a free buffer of a preallocated pool and queues it (both channels
// hold fragQueueLen; with no free buffer the fragment is dropped,
// fragment_queue_full), and one goroutine (run) owns the
// reassembly.Reassembler and hands each datagram it completes to a
// worker through Engine.ReceiveWAN's mailbox, as the kernel sockets of the
// shared mode hand the datagrams the kernel reassembled. Fragments are
// rare (a peer behind a small path MTU), so one goroutine is enough and
// keeps the workers' hot path free of it: a worker only copies.
type reassembler struct {
	r    *reassembly.Reassembler
	bufs []byte       // fragQueueLen buffers of fragBufLen
	free chan int32   // free buffers
	work chan fragJob // queued fragments
	done chan struct{}
}

type fragJob struct{ buf, n int32 }

func newReassembler() *reassembler {
	q := &reassembler{
		r:    reassembly.New(reassembly.Config{MinFirst: header.UDPLen}),
		bufs: make([]byte, fragQueueLen*fragBufLen),
		free: make(chan int32, fragQueueLen), work: make(chan fragJob, fragQueueLen),
		done: make(chan struct{}),
	}
	for i := range int32(fragQueueLen) {
		q.free <- i
	}
	return q
}

// put copies pkt, an IP fragment, into a free buffer and queues it. It
// returns false when no buffer is free. Safe for concurrent use; never
// blocks (work holds every buffer).
func (q *reassembler) put(pkt []byte) bool {
	if len(pkt) > fragBufLen {
		return false // longer than any frame
	}
	select {
	case i := <-q.free:
		copy(q.bufs[int(i)*fragBufLen:], pkt)
		q.work <- fragJob{i, int32(len(pkt))}
		return true
	default:
		return false
	}
}

// wanFragment takes an IP fragment a worker received on the WAN (w.pkt
// as Parse left it, ReasonFragment, of the WAN's VLAN): one of UDP to one
// of our addresses is queued for the reassembler and counts as consumed
// (1); any other is a drop counted in bad (0).
func (w *worker) wanFragment(d []byte, bad *[NumDropReasons]int32, lastWAN *netip.Addr) int {
	if w.pkt.Proto != header.ProtoUDP || w.pkt.Dst != w.wan.addr4 && w.pkt.Dst != w.wan.addr6 &&
		w.pkt.Dst != *lastWAN && !w.otherWAN(lastWAN) {
		bad[DropNotForUs]++
		return 0
	}
	if !w.e.reasm.put(d[w.pkt.L3Off:w.pkt.L3End]) {
		bad[DropFragmentQueueFull]++
		return 0
	}
	return 1
}

// runReassembly is the reassembler's goroutine: it adds the queued
// fragments on the engine's clock, delivers what they complete, and
// expires the datagrams past their timeout once a second, until done.
func (e *Engine) runReassembly() {
	q := e.reasm
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case j := <-q.work:
			e.reassembleJob(j)
		case <-tick.C:
			q.r.Expire(e.now())
		case <-q.done:
			return
		}
	}
}

// reassembleJob adds a queued fragment and delivers the datagram it
// completes.
func (e *Engine) reassembleJob(j fragJob) {
	q := e.reasm
	off := int(j.buf) * fragBufLen
	d, ok := q.r.Add(q.bufs[off:off+int(j.n)], e.now())
	q.free <- j.buf
	if ok {
		e.deliverReassembled(d)
	}
}

// deliverReassembled checks a reassembled datagram's UDP header as Linux
// checks a datagram for its socket (RFC 768; net/ipv4/udp.c): a length
// within the datagram (the bytes past it cut off), a checksum that
// verifies where it is not zero, and not zero over IPv6 (RFC 8200 §8.1),
// one of our ports; and hands its payload to a worker by source port
// (ReceiveWAN, counting nothing in FromKernel). What it refuses is
// counted by reason with the datagram's fragments.
func (e *Engine) deliverReassembled(d reassembly.Datagram) {
	r := e.reasm.r
	if d.Proto != header.ProtoUDP || len(d.Data) < header.UDPLen {
		r.Discard(d, reassembly.DropUDPMalformed)
		return
	}
	ulen := int(binary.BigEndian.Uint16(d.Data[4:6]))
	if ulen < header.UDPLen || ulen > len(d.Data) {
		r.Discard(d, reassembly.DropUDPMalformed)
		return
	}
	u := header.UDP(d.Data[:ulen])
	if u.Checksum() == 0 && d.Src.Is6() ||
		u.Checksum() != 0 && !u.VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, d.Src, d.Dst, ulen)) {
		r.Discard(d, reassembly.DropUDPChecksum)
		return
	}
	if u.DstPort()-e.wan.Load().port >= max(e.cfg.SourcePorts, 1) {
		r.Discard(d, reassembly.DropNotForUs)
		return
	}
	e.receiveWAN(int(u.SrcPort()), netip.AddrPortFrom(d.Src, u.SrcPort()), netip.AddrPortFrom(d.Dst, u.DstPort()), u.Payload(), false)
}

// ReassemblyStats returns the reassembler's counters, and false when the
// engine does not reassemble (Config.Reassemble off). Safe for concurrent
// use.
func (e *Engine) ReassemblyStats() (ReassemblyStats, bool) {
	if e.reasm == nil {
		return ReassemblyStats{}, false
	}
	return e.reasm.r.Stats(), true
}
