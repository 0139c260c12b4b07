package fastpath

import (
	"encoding/binary"

	"github.com/wgpio/wgpio/chachapoly"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// inAhead is the scratch of inbound's look-ahead (inboundAhead), per
// worker: a burst's receiver indexes and counters, the keypairs their
// slots name, and the addresses to prefetch. Nothing in it keeps an
// object reachable past a burst (the keypairs are cleared; the addresses
// are numbers).
type inAhead struct {
	idx   []uint32
	ctr   []uint64
	kp    []*Keypair
	lines []uintptr // prefetch lists (addrOf)
	// many: the burst is from aheadMinPeers sessions or more (set by
	// inboundAhead for sourcesAhead).
	many bool
}

// newInAhead makes the scratch for bursts of burst frames (outbound's of
// up to fb with fragments, whose look-ahead uses lines too: up to five per
// frame).
func newInAhead(burst, fb int) inAhead {
	return inAhead{
		idx:   make([]uint32, burst),
		ctr:   make([]uint64, burst),
		kp:    make([]*Keypair, burst),
		lines: make([]uintptr, 0, max(5*burst, 5*fb)),
	}
}

// inAheadMinIndexes is the fewest receiver indexes in use (sessions, and
// handshakes in flight) for which inbound runs its look-ahead
// (Engine.inAheadMin). With fewer, the state of the sessions a burst
// comes from mostly stays in the caches from one burst to the next, and
// the look-ahead's passes over the burst only cost.
// BenchmarkManyPeersInbound (-test.benchtime 3000000x -test.cpu 1,
// alternating rounds, Intel Xeon, load 3-4), med-extra-ns/pkt without
// the look-ahead against with it: 64 sessions of 1,000 sending 46-47
// against 70-72; all 1,000 sending 83-86 against 82-83; 4,000 of 4,000
// 101-107 against 93-96; 8,000 of 8,000 94-95 against 90-100. (The
// outbound look-ahead's threshold counts prefixes, aheadMinPrefixes.)
const inAheadMinIndexes = 2048

// inboundAhead runs before authenticate for a burst of transport
// messages of aheadMinPeers sessions or more (runs of one receiver index),
// on a gateway with inAheadMinIndexes indexes or more:
// it loads, level by level, what authenticate, replayCheck and deliver
// will read of each message's session, with the prefetches of one level
// for the whole burst in flight at once: the receiver-index slots, then
// the keypairs' state and receive-key lines, then the replay windows'
// first line and the ring block of the message's counter, and the peers'
// first line, then the worker's state of each peer (peerLocal) and the
// peer's endpoint. With traffic from thousands of peers none of this is
// in cache (or the TLB) when a session's next message comes, and taken
// per message in authenticate's loop the misses would come one after
// another (slot, then keypair; then, per session, a locked replay check
// whose misses nothing overlaps). Nothing here is trusted: the indexes
// and counters are read from the frames unchecked, a slot's keypair is
// not matched against its index, and only addresses are computed from
// what is loaded; authenticate checks everything as before.
func (w *worker) inboundAhead(frames []dataplane.Frame) {
	a := &w.in
	// After a burst of a few sessions, one whose first, middle and last
	// frames are of one session is taken for a burst of one (their lines
	// stay in cache) without reading every frame: each read of a
	// frame's first line costs a miss of the L1, where the first lines
	// of a burst's frames, a frame size apart, fall in one set
	// (oneSession). A burst of many sessions that these three frames
	// agree on goes without look-ahead, as a burst of a few sessions
	// does; after a burst of many, every frame is read, as before.
	if !a.many && oneSession(frames) {
		return
	}
	n := len(frames)
	idx, ctr, kps := a.idx[:n], a.ctr[:n], a.kp[:n]
	runs, last := 0, uint32(0)
	for i := range frames {
		x, c, ok := aheadTransport(frames[i].Data())
		idx[i], ctr[i] = x, c
		if ok && (runs == 0 || x != last) {
			runs++
			last = x
		}
		kps[i] = nil
	}
	if a.many = runs >= aheadMinPeers; !a.many {
		return // a few sessions: their lines stay in cache
	}
	sp := w.e.indexes.slots.Load()
	if sp == nil {
		return
	}
	slots := *sp
	mask := uint32(len(slots) - 1)
	// Level 1: the index slots.
	lines := a.lines[:0]
	for i, x := range idx {
		if i == 0 || x != idx[i-1] {
			lines = append(lines, addrOf(&slots[x&mask]))
		}
	}
	prefetch(lines)
	// Level 2: the keypairs' state line (expiry, index, peer, window) and
	// receive line (the key Open reads); the first, the send line, is not
	// read on this path.
	lines = lines[:0]
	var prev *Keypair
	for i, x := range idx {
		if i > 0 && x == idx[i-1] {
			kps[i] = prev
			continue
		}
		kp := slots[x&mask].kp.Load()
		kps[i], prev = kp, kp
		if kp != nil {
			lines = append(lines, addrOf(&kp.Created), addrOf(&kp.receive))
		}
	}
	prefetch(lines)
	// Level 3: the replay window's state and the block of the message's
	// counter (messages of one session in a burst mostly share them), and
	// the peer's first line (ID, Endpoint).
	lines = lines[:0]
	prev = nil
	for i, kp := range kps {
		if kp == nil {
			continue
		}
		if rw := kp.replay.Load(); rw != nil && (kp != prev || ctr[i]>>6 != ctr[i-1]>>6) {
			head, block := rw.Lines(ctr[i])
			if kp != prev {
				lines = append(lines, uintptr(head))
			}
			lines = append(lines, uintptr(block))
		}
		if kp != prev {
			if p := kp.Peer; p != nil {
				lines = append(lines, addrOf(p))
			}
		}
		prev = kp
	}
	prefetch(lines)
	// Level 4: the worker's state of each peer (the lines deliver
	// writes: its first, the stamps, roaming) and the peer's endpoint.
	lines = lines[:0]
	prev = nil
	nl := len(w.local) * localChunk
	for _, kp := range kps {
		if kp == nil || kp == prev {
			continue
		}
		prev = kp
		p := kp.Peer
		if p == nil {
			continue
		}
		if ep := p.Endpoint.Load(); ep != nil {
			lines = append(lines, addrOf(ep))
		}
		if id := p.ID; id >= 0 && id < nl {
			if ch := w.local[id/localChunk]; ch != nil {
				pl := &ch[id%localChunk]
				lines = append(lines, addrOf(pl), addrOf(&pl.lastReceived), addrOf(&pl.lastSrc))
			}
		}
	}
	prefetch(lines)
	clear(kps) // no keypair stays reachable from here
}

// sourcesAhead runs after authenticate opened a burst from many sessions
// (q, the messages, ok[k] whether q[k] is authentic): it prefetches the
// source route cache's set of each authentic inner packet's source
// address, which the allowed-IPs check looks up next, one packet after
// another. The addresses are read from the plaintext unchecked.
func (w *worker) sourcesAhead(q []chachapoly.Packet, ok []bool) {
	c := w.srcRoutes
	if !w.in.many || len(c.entries) == 0 {
		return
	}
	lines := w.in.lines[:0]
	for k := range q {
		if !ok[k] {
			continue
		}
		p := q[k].Data
		switch {
		case len(p) >= header.IPv4MinLen && p[0]>>4 == header.IPv4Version:
			lines = append(lines, addrOf(c.set(0, 0xffff<<32|uint64(binary.BigEndian.Uint32(p[12:16])), true)))
		case len(p) >= header.IPv6Len && p[0]>>4 == header.IPv6Version:
			lines = append(lines, addrOf(c.set(binary.BigEndian.Uint64(p[8:16]), binary.BigEndian.Uint64(p[16:24]), false)))
		}
	}
	prefetch(lines)
}

// oneSession reports whether the first, middle and last frames of a
// burst hold transport messages of one receiver index, at the first
// frame's offset, behind the same EtherType, VLAN EtherType and IPv4
// header length: what aheadTransport would read as one run.
func oneSession(frames []dataplane.Frame) bool {
	n := len(frames)
	if n == 0 {
		return false
	}
	d0 := frames[0].Data()
	x, _, ok := aheadTransport(d0)
	if !ok {
		return false
	}
	off, mask := msgOffset(d0)
	hdr := binary.LittleEndian.Uint64(d0[11:19]) & mask
	for _, i := range [2]int{n / 2, n - 1} {
		d := frames[i].Data()
		if len(d) < off+protocol.TransportHeaderSize || binary.LittleEndian.Uint64(d[11:19])&mask != hdr ||
			d[off] != protocol.TypeTransport || binary.LittleEndian.Uint32(d[off+4:off+8]) != x {
			return false
		}
	}
	return true
}

// msgOffset is where aheadTransport finds the message in d, a frame it
// returned ok for, and which of d's bytes 11 to 18 (read little-endian)
// that offset depends on: the EtherType (12, 13), behind a tag the inner
// one (16, 17), and for IPv4 the header length (the low nibble of 14 or
// 18). Byte 11 is only there to make the read 8 bytes.
func msgOffset(d []byte) (off int, mask uint64) {
	l2, mask := header.EthernetLen, uint64(0xffff00)
	et := binary.BigEndian.Uint16(d[12:14])
	if et == header.EtherTypeVLAN {
		et, l2, mask = binary.BigEndian.Uint16(d[16:18]), header.EthernetVLANLen, mask|0xffff<<40
	}
	if et == header.EtherTypeIPv4 {
		return l2 + int(d[l2]&0x0f)*4 + header.UDPLen, mask | 0x0f<<(8*(l2-11))
	}
	return l2 + header.IPv6Len + header.UDPLen, mask
}

// aheadTransport reads the receiver index and counter of the transport
// message in the WAN frame d (Ethernet, untagged or one tag, IPv4 or IPv6,
// UDP), or returns ok = false; nothing is checked but the lengths and the
// message type.
func aheadTransport(d []byte) (idx uint32, c uint64, ok bool) {
	l2 := header.EthernetLen
	if len(d) < l2 {
		return 0, 0, false
	}
	et := binary.BigEndian.Uint16(d[12:14])
	if et == header.EtherTypeVLAN && len(d) >= header.EthernetVLANLen {
		et, l2 = binary.BigEndian.Uint16(d[16:18]), header.EthernetVLANLen
	}
	off := 0
	switch {
	case et == header.EtherTypeIPv4 && len(d) > l2:
		off = l2 + int(d[l2]&0x0f)*4 + header.UDPLen
	case et == header.EtherTypeIPv6:
		off = l2 + header.IPv6Len + header.UDPLen
	default:
		return 0, 0, false
	}
	if len(d) < off+protocol.TransportHeaderSize || d[off] != protocol.TypeTransport {
		return 0, 0, false
	}
	m := d[off : off+protocol.TransportHeaderSize]
	return binary.LittleEndian.Uint32(m[4:8]), binary.LittleEndian.Uint64(m[8:16]), true
}
