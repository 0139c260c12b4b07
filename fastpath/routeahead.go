package fastpath

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// routeAhead runs for a burst after one for aheadMinPeers distinct peers
// or more, when the table has aheadMinPrefixes prefixes or more: a burst
// of a few flows finds its routes and peers in cache, and so do the
// bursts of a gateway whose peers' state fits the processor's caches (a
// few thousand peers), for which the extra loops would only cost.
const (
	aheadMinPeers    = 4
	aheadMinPrefixes = 8192
)

// routeAheadFrame is routeAhead's reading of one frame of an outbound
// burst (worker.ahead[i] for frames[i]): its destination and the peer the
// route cache or the table gives it. Pass 1 takes the answer only for the
// address it parsed itself.
type routeAheadFrame struct {
	peer *Peer  // the destination's peer; nil: no route, or no address read
	id   uint32 // peer's ID as the route cache holds it (worker.metAt)
	key  uint32 // the IPv4 destination, big-endian, unless set is aheadOther
	// set is the index of key's route cache set; aheadOther for a frame
	// that is not untagged IPv4 (dst holds its address), aheadMissed
	// when the set's newer entry was of another address and the route
	// was looked up in full.
	set int32
	// hint is the address of the keypair the peer last sent with, as
	// the route cache's IPv4 entry remembers it (0: none): prefetched
	// beside the peer's lines, a level of misses earlier than warm.
	hint uintptr
	dst  netip.Addr // set == aheadOther: the destination aheadDst read (zero: none)
}

const (
	aheadOther  = -1
	aheadMissed = -2
)

// addr is the destination a routeAheadFrame answers for.
func (a *routeAheadFrame) addr() netip.Addr {
	if a.set == aheadOther {
		return a.dst
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], a.key)
	return netip.AddrFrom4(b)
}

// routeAhead looks up the destination of each frame of an outbound burst
// before pass 1 (w.ahead[i] for frames[i]), and prefetches what pass 1
// and pass 2 will need of each frame's peer, level by level in tight
// loops of their own: the route cache sets of all frames (aheadSets),
// then (the lookups: hits, mostly, or the prefix table) each peer's first
// line, the worker's state for it (peerLocal's first line: the lease, the
// stamps and the outer headers' destination; warm prefetches the template
// of a peer that has one) and, on a hit, the send line of the keypair
// the entry's hint names (routeCacheEntry.hi), which warm would
// otherwise find only once the peer's line came. The prefetches of one
// level do not depend on each other and, unlike loads, do not wait to
// retire, so the processor has the cache misses of the whole burst in
// flight at once, where pass 1, long per frame, would take a chain of
// dependent misses (entry, table, peer, state) for one frame after
// another. With traffic
// for thousands of peers, and a worker woken for a burst after others
// ran, little of this is in cache (or the TLB) when a peer's next burst
// comes. Pass 1 takes an answer only for the address it parsed itself,
// so a guess that is wrong (a malformed frame) costs a lookup and changes
// nothing. The loops over the burst make no calls and keep their values
// in registers: an untagged IPv4 frame, the usual one, is read and looked
// up inline; the rest (other frames, and the addresses whose set missed)
// go through lookupID in a loop of their own, aheadSlow.
func (w *worker) routeAhead(rt *routeTable, frames []dataplane.Frame) {
	c := w.dstRoutes
	c.use(rt)
	ahead := w.ahead[:len(frames)]
	lines := w.in.lines[:len(frames)] // the look-ahead's scratch (inahead.go), free outside inbound
	n, others := aheadSets(c, frames, ahead, lines)
	prefetchAhead(lines[:n])
	if others {
		aheadOthers(frames, ahead)
	}
	if slow := aheadHits(c, ahead); slow || others {
		aheadSlow(rt, c, ahead)
	}
	prefetchAhead(w.aheadPeers(ahead, w.in.lines[:4*len(ahead)]))
}

// aheadSets is routeAhead's first level: for each frame, its untagged
// IPv4 destination as a key and the key's cache set (the set's line in
// lines[:n]), or aheadOther (others reports whether there was such a
// frame, for aheadOthers). lines holds a line per frame. (The hash is
// set4's.)
func aheadSets(c *routeCache, frames []dataplane.Frame, ahead []routeAheadFrame, lines []uintptr) (n int, others bool) {
	base, shift := addrOf(unsafe.SliceData(c.entries)), c.shift&63
	ahead, lines = ahead[:len(frames)], lines[:len(frames)]
	for i := range frames {
		a := &ahead[i]
		d := frames[i].Prefix(header.EthernetLen + header.IPv4MinLen)
		if d == nil || binary.BigEndian.Uint16(d[12:14]) != header.EtherTypeIPv4 {
			a.set, others = aheadOther, true
			continue
		}
		k := binary.BigEndian.Uint32(d[header.EthernetLen+16 : header.EthernetLen+20])
		set := (uint64(k) * 0x9e3779b97f4a7c15) >> shift
		a.key, a.set = k, int32(set)
		lines[n] = base + uintptr(set)*2*unsafe.Sizeof(routeCacheEntry{})
		n++
	}
	return n, others
}

// aheadOthers reads the destination of each frame aheadSets left to the
// slow path (aheadOther) into its dst.
func aheadOthers(frames []dataplane.Frame, ahead []routeAheadFrame) {
	for i := range ahead {
		if a := &ahead[i]; a.set == aheadOther {
			a.dst = aheadDst(frames[i].Data())
		}
	}
}

// aheadHits is routeAhead's second level for the keyed frames: the peer
// (and ID) of each key whose set's newer entry holds it, as find4; a
// frame whose entry is of another address or generation is marked
// aheadMissed, and slow reports whether there was one.
func aheadHits(c *routeCache, ahead []routeAheadFrame) (slow bool) {
	entries, tag := unsafe.Pointer(unsafe.SliceData(c.entries)), c.tag4
	for i := range ahead {
		a := &ahead[i]
		if a.set < 0 {
			continue
		}
		e := (*routeCacheEntry)(unsafe.Add(entries, uintptr(a.set)*2*unsafe.Sizeof(routeCacheEntry{})))
		if e.lo == 0xffff<<32|uint64(a.key) && e.tag == tag {
			a.peer, a.id, a.hint = e.peer, e.id, uintptr(e.hi)
			continue
		}
		a.set = aheadMissed
		slow = true
	}
	return slow
}

// aheadSlow looks up, through the cache and the table, the destination
// of each frame aheadHits could not answer (aheadOther, aheadMissed).
func aheadSlow(rt *routeTable, c *routeCache, ahead []routeAheadFrame) {
	for i := range ahead {
		a := &ahead[i]
		if a.set >= 0 {
			continue
		}
		a.peer, a.id = nil, 0
		if d := a.addr(); d.IsValid() {
			a.peer, a.id, _ = c.lookupID(rt, d)
		}
	}
}

// aheadPeers is routeAhead's last level: the lines of each frame's peer
// (once for a run of frames to one peer), of the worker's state for it,
// found by the route cache's ID without waiting for the peer's line, and
// of the keypair its entry's hint names, in lines, which has room for
// four per frame.
func (w *worker) aheadPeers(ahead []routeAheadFrame, lines []uintptr) []uintptr {
	local := w.local
	lines = lines[:4*len(ahead)]
	n := 0
	var last *Peer
	for i := range ahead {
		p, id := ahead[i].peer, uint(ahead[i].id)
		if p == nil || p == last {
			continue
		}
		last = p
		lines[n] = addrOf(p)
		n++
		if h := ahead[i].hint; h != 0 {
			lines[n] = h
			n++
		}
		if ch := id / localChunk; ch < uint(len(local)) && local[ch] != nil {
			pl := &local[ch][id%localChunk]
			lines[n] = addrOf(pl)
			n++
		}
	}
	return lines[:n]
}

// aheadDst reads the destination address of the IPv4 or IPv6 packet in
// the Ethernet frame d (untagged or with one tag), or returns the zero
// Addr; nothing is checked but the lengths.
func aheadDst(d []byte) netip.Addr {
	l2 := header.EthernetLen
	if len(d) < l2 {
		return netip.Addr{}
	}
	et := binary.BigEndian.Uint16(d[12:14])
	if et == header.EtherTypeVLAN && len(d) >= header.EthernetVLANLen {
		et, l2 = binary.BigEndian.Uint16(d[16:18]), header.EthernetVLANLen
	}
	switch {
	case et == header.EtherTypeIPv4 && len(d) >= l2+header.IPv4MinLen:
		return netip.AddrFrom4([4]byte(d[l2+16 : l2+20]))
	case et == header.EtherTypeIPv6 && len(d) >= l2+header.IPv6Len:
		return netip.AddrFrom16([16]byte(d[l2+24 : l2+40]))
	}
	return netip.Addr{}
}

// lookupDst is pass 1's lookup of dst, the destination of frame i, when
// find4 did not answer: routeAhead's answer when it read the same address
// for the frame (ahead), otherwise the route cache's (and the table's),
// with the peer's ID as the cache holds it.
func (w *worker) lookupDst(rt *routeTable, dst netip.Addr, ahead bool, i int) (*Peer, uint) {
	if ahead {
		if a := &w.ahead[i]; a.set == aheadOther && a.dst == dst {
			return a.peer, uint(a.id)
		}
	}
	p, id, _ := w.dstRoutes.lookupID(rt, dst)
	return p, uint(id)
}
