package fastpath

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/reassembly"
	"github.com/wgpio/wgpio/replay"
)

// ReassemblyStats are the counters of the engine's reassembler
// (Config.Reassemble): fragments taken, datagrams reassembled, datagrams
// in progress and the bytes they hold, and dropped fragments by reason
// (package internal/reassembly: bad_header, tiny_first, too_big,
// duplicate, overlap, inconsistent, too_many_holes, timeout, table_full,
// memory_full, and for a reassembled datagram refused: udp_malformed,
// udp_checksum, not_for_us).
type ReassemblyStats = reassembly.Stats

// reassembler is the engine's reassembly of the WireGuard datagrams that
// reach the WAN ports as IP fragments (Config.Reassemble: the owned
// address mode, whose kernel has no address to reassemble them for).
//
// The fragments of one datagram may arrive on different RX queues (RSS
// hashes IPv4 fragments, which carry no ports, by addresses alone, but a
// NIC may hash a first fragment, or an IPv6 one, otherwise than the
// rest), so no worker can reassemble alone: the workers share one
// reassembly.Reassembler under a mutex, as Linux's softirqs share one
// fragment table per network namespace under per-datagram locks. A
// worker that receives a fragment adds it inline (wanFragment), and one
// that completes a datagram wraps it in a frame of its WAN pool at once
// (wrapWAN) and handles it after its burst, as a frame it received:
// neither a copy to another goroutine nor an allocation. The lock is held
// for one Add: a look-up in a keyed hash table of the datagrams in
// progress, a copy of
// the fragment's bytes, and on completion a copy of the datagram out;
// only fragments to our addresses take it, which are rare but for a peer
// behind a small path MTU, whose every full-size datagram comes in two.
// (Handing the fragments to a goroutine of its own instead lost them
// under load: a worker that spins on its P readies that goroutine on the
// same P, where it waits for another P to steal it.) One goroutine
// (runReassembly) drops, once a second, the datagrams past their
// timeout.
type reassembler struct {
	mu   sync.Mutex
	r    *reassembly.Reassembler
	done chan struct{}
}

func newReassembler() *reassembler {
	return &reassembler{r: reassembly.New(reassembly.Config{MinFirst: header.UDPLen}), done: make(chan struct{})}
}

// wanFragment takes an IP fragment a worker received on the WAN (w.pkt
// as Parse left it, ReasonFragment, of the WAN's VLAN) at now. One of UDP
// to one of our addresses goes to the reassembler, and counts as consumed
// (1: its frame is freed with the burst's); any other is a drop counted
// in bad (0). A datagram it completes is queued in w.reasmOut.
func (w *worker) wanFragment(d []byte, bad *[NumDropReasons]int32, lastWAN *netip.Addr, now int64) int {
	if w.pkt.Proto != header.ProtoUDP || w.pkt.Dst != w.wan.addr4 && w.pkt.Dst != w.wan.addr6 &&
		w.pkt.Dst != *lastWAN && !w.otherWAN(lastWAN) {
		bad[DropNotForUs]++
		return 0
	}
	if header.MartianSource(d[w.pkt.L3Off:]) {
		bad[DropWANMartian]++
		return 0
	}
	q := w.e.reasm
	q.mu.Lock()
	if dg, ok := q.r.Add(d[w.pkt.L3Off:w.pkt.L3End], now); ok {
		w.reassembled(dg) // dg.Data is the reassembler's: under the lock
	}
	q.mu.Unlock()
	return 1
}

// reassembled checks a reassembled datagram's UDP header as Linux checks
// a datagram for its socket (RFC 768; net/ipv4/udp.c): a length within
// the datagram (the bytes past it cut off), a checksum that verifies
// where it is not zero, and not zero over IPv6 (RFC 8200 §8.1), one of
// our ports. It wraps the payload in a frame (wrapWAN) appended to
// w.reasmOut, which inbound handles after the burst. What it refuses is
// counted by reason with the datagram's fragments. Called with the
// reassembler's lock held.
func (w *worker) reassembled(d reassembly.Datagram) {
	r := w.e.reasm.r
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
	if u.DstPort()-w.wan.port >= w.portSpan {
		r.Discard(d, reassembly.DropNotForUs)
		return
	}
	n := len(w.reasmOut)
	if n == cap(w.reasmOut) { // one per frame of a burst: not reached
		w.count(DropNoBuffer, 1)
		return
	}
	if w.wrapWAN(w.reasmOut[n:n+1], netip.AddrPortFrom(d.Src, u.SrcPort()), netip.AddrPortFrom(d.Dst, u.DstPort()), u.Payload()) {
		w.reasmOut = w.reasmOut[:n+1]
	}
}

// inboundReassembled handles the datagrams the burst's fragments completed
// (w.reasmOut) as a burst of their own.
func (w *worker) inboundReassembled(now int64) {
	if len(w.reasmOut) > 0 {
		out := w.reasmOut
		w.reasmOut = w.reasmOut[:0]
		w.rxQueue = replay.AnyQueue // a NIC hashes fragments on addresses alone
		w.inboundBurst(out, now)
		w.rxQueue = w.id
	}
}

// newReasmOut is a worker's w.reasmOut: room for a datagram per frame of
// a burst.
func newReasmOut(e *Engine, burst int) []dataplane.Frame {
	if e.reasm == nil {
		return nil
	}
	return make([]dataplane.Frame, 0, burst)
}

// runReassembly drops, once a second until done, the datagrams past their
// timeout (on the engine's clock).
func (e *Engine) runReassembly() {
	q := e.reasm
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			e.expireReassembly()
		case <-q.done:
			return
		}
	}
}

// expireReassembly drops the datagrams past their timeout now.
func (e *Engine) expireReassembly() {
	q := e.reasm
	q.mu.Lock()
	q.r.Expire(e.now())
	q.mu.Unlock()
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
