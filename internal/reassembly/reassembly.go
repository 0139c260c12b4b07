package reassembly

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/counts"
)

// Sizes and defaults (see the package comment).
const (
	// PageSize is the unit, in bytes, in which datagrams hold data: a
	// datagram's fragmentable part is cut into pages at multiples of it,
	// and a fragment takes the pages its bytes fall in.
	PageSize = 2048
	// MaxDatagramLen is the largest IP packet a datagram may make, in
	// bytes (the IPv4 total length; the IPv6 payload length).
	MaxDatagramLen = 65535
	// MaxRuns is the most separate runs of received bytes a datagram may
	// have (in order or nearly, it has one).
	MaxRuns = 32

	DefaultMaxDatagrams = 256
	DefaultMaxBytes     = 4 << 20
	DefaultTimeout4     = 30 * time.Second
	DefaultTimeout6     = 60 * time.Second

	pagesPerDatagram = (MaxDatagramLen + PageSize - 1) / PageSize
)

// Config bounds a Reassembler. Zero fields take the defaults.
type Config struct {
	// MaxDatagrams is the most datagrams in progress at once (default
	// DefaultMaxDatagrams).
	MaxDatagrams int
	// MaxBytes is the size of the data arena in bytes, rounded up to
	// whole pages (default DefaultMaxBytes, Linux's ipfrag_high_thresh);
	// at least one datagram's worth (MaxDatagramLen) is always taken.
	MaxBytes int
	// Timeout4 and Timeout6 are how long an IPv4 and an IPv6 datagram may
	// stay incomplete, from its first fragment received (defaults
	// DefaultTimeout4, DefaultTimeout6).
	Timeout4, Timeout6 time.Duration
	// MinFirst is the fewest bytes of data a first fragment (offset 0)
	// must carry: the upper-layer header (8 for UDP). 0: no minimum.
	MinFirst int
}

// DropReason says why fragments were dropped (see the package comment).
type DropReason uint8

// Drop reasons; each counts fragments.
const (
	DropBadHeader DropReason = iota
	DropTinyFirst
	DropTooBig
	DropDuplicate
	DropOverlap
	DropInconsistent
	DropTooManyHoles
	DropTimeout
	DropTableFull
	DropMemoryFull
	// DropUDPMalformed, DropUDPChecksum and DropNotForUs are the caller's
	// (Discard): a reassembled UDP datagram whose length field does not
	// fit, whose checksum does not verify (or is zero over IPv6, RFC 8200
	// §8.1), or that is for another port.
	DropUDPMalformed
	DropUDPChecksum
	DropNotForUs

	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropBadHeader:    "bad_header",
	DropTinyFirst:    "tiny_first",
	DropTooBig:       "too_big",
	DropDuplicate:    "duplicate",
	DropOverlap:      "overlap",
	DropInconsistent: "inconsistent",
	DropTooManyHoles: "too_many_holes",
	DropTimeout:      "timeout",
	DropTableFull:    "table_full",
	DropMemoryFull:   "memory_full",
	DropUDPMalformed: "udp_malformed",
	DropUDPChecksum:  "udp_checksum",
	DropNotForUs:     "not_for_us",
}

// String is the reason's snake-case name (metric label, JSON key).
func (r DropReason) String() string { return counts.Name(dropNames[:], r) }

const _ = counts.MaxReasons - NumDropReasons

// DropCounts counts dropped fragments by reason (internal/counts.Counts:
// JSON by name, List, Total, Add).
type DropCounts = counts.Counts[DropReason]

// Stats are a Reassembler's counters.
type Stats struct {
	// Fragments counts the fragments given to Add.
	Fragments uint64 `json:"fragments"`
	// Reassembled counts the datagrams completed (each of whose
	// fragments is in Fragments).
	Reassembled uint64 `json:"reassembled"`
	// InProgress and BytesHeld are the datagrams incomplete now and the
	// bytes of pages they hold.
	InProgress uint64 `json:"in_progress"`
	BytesHeld  uint64 `json:"bytes_held"`
	// Drops counts dropped fragments by reason.
	Drops DropCounts `json:"drops"`
}

// Datagram is a reassembled datagram. Data is the fragmentable part (the
// upper-layer header and data), which aliases the Reassembler's output
// buffer: valid until its next Add, Expire or Discard.
type Datagram struct {
	Src, Dst  netip.Addr
	Proto     uint8 // IPv4 protocol, or the Fragment header's Next Header
	Data      []byte
	Fragments int // fragments it was made of
}

// key identifies a datagram: IPv4 by source, destination, protocol and
// identification (RFC 791 §3.2), IPv6 by source, destination and
// identification (RFC 8200 §4.5; proto is 0).
type key struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6       bool
	used     bool
}

type run struct{ lo, hi int32 }

// datagram is one in progress.
type datagram struct {
	created int64 // clock of its first fragment, ns
	total   int32 // end of the fragmentable part (the last fragment's end), or -1
	maxEnd  int32 // the highest end received
	frags   int32 // fragments held
	nruns   int32
	npages  int32
	proto   uint8        // the first fragment's protocol or Next Header
	runs    [MaxRuns]run // received bytes, sorted, neither overlapping nor adjacent
	pages   [pagesPerDatagram]int32
}

// Reassembler holds the datagrams in progress; see the package comment.
// Not safe for concurrent use but for Stats.
type Reassembler struct {
	timeout4, timeout6 int64
	minFirst           int
	keys               []key // per slot
	slots              []datagram
	// The slots in use are found by key through a hash table (buckets of
	// chains through next, the hash keyed by seed: an attacker who
	// picks sources and identifications cannot pick collisions) and kept
	// in the order they were started (older, newer; first the oldest,
	// last the newest) for eviction; freeSlots are the others. Each is
	// O(1) per fragment, where scanning every slot for the key and the
	// oldest cost 1.4-1.7 µs a fragment in a flood that keeps the table
	// full, 0.12-0.30 µs this way (BenchmarkAdd, flood; a peer's
	// fragments 0.53-0.61 µs against 0.12-0.15).
	seed         maphash.Seed
	buckets      []int32 // chain heads by hash & (len-1), -1: empty
	next         []int32 // per slot: the next in its bucket's chain
	hash         []uint64
	older, newer []int32 // per slot: neighbours in start order, -1: none
	first, last  int32
	freeSlots    []int32
	arena        []byte
	free         []int32 // free pages
	out          []byte
	pkt          header.Packet
	inProgress   int

	fragments, reassembled atomic.Uint64
	inProg, held           atomic.Int64
	drops                  counts.Atomic[DropReason]
}

// New allocates a Reassembler with c's bounds.
func New(c Config) *Reassembler {
	if c.MaxDatagrams <= 0 {
		c.MaxDatagrams = DefaultMaxDatagrams
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Timeout4 <= 0 {
		c.Timeout4 = DefaultTimeout4
	}
	if c.Timeout6 <= 0 {
		c.Timeout6 = DefaultTimeout6
	}
	pages := max((c.MaxBytes+PageSize-1)/PageSize, pagesPerDatagram)
	n := c.MaxDatagrams
	r := &Reassembler{
		timeout4: int64(c.Timeout4), timeout6: int64(c.Timeout6), minFirst: c.MinFirst,
		keys: make([]key, n), slots: make([]datagram, n),
		arena: make([]byte, pages*PageSize), free: make([]int32, pages),
		out:  make([]byte, MaxDatagramLen),
		seed: maphash.MakeSeed(), buckets: make([]int32, 1<<bits.Len(uint(2*n-1))),
		next: make([]int32, n), hash: make([]uint64, n),
		older: make([]int32, n), newer: make([]int32, n), first: -1, last: -1,
		freeSlots: make([]int32, n),
	}
	for i := range r.free {
		r.free[i] = int32(pages - 1 - i)
	}
	for i := range r.buckets {
		r.buckets[i] = -1
	}
	for i := range r.freeSlots {
		r.freeSlots[i] = int32(n - 1 - i)
	}
	return r
}

// Stats returns the counters. Safe for concurrent use.
func (r *Reassembler) Stats() Stats {
	return Stats{
		Fragments: r.fragments.Load(), Reassembled: r.reassembled.Load(),
		InProgress: uint64(r.inProg.Load()), BytesHeld: uint64(r.held.Load()),
		Drops: r.drops.Load(),
	}
}

// Discard counts the fragments of d, a datagram Add returned that the
// caller refuses, under reason why.
func (r *Reassembler) Discard(d Datagram, why DropReason) {
	r.drops.Add(why, uint64(d.Fragments))
}

// Add takes one fragment, a bare IP packet from its IP header (bytes past
// its IP length are ignored), received at now (ns, the clock Expire is
// given). It copies what it keeps. When the fragment completes its
// datagram, Add returns the datagram and true. What it drops is counted
// by reason.
func (r *Reassembler) Add(pkt []byte, now int64) (Datagram, bool) {
	r.fragments.Add(1)
	p := &r.pkt
	if header.ParseIP(pkt, p) != header.ReasonFragment {
		r.drops.Add(DropBadHeader, 1)
		return Datagram{}, false
	}
	var ky key
	var off, hdr int
	var more bool
	var proto uint8
	if p.IPVersion == header.IPv4Version {
		fo := binary.BigEndian.Uint16(pkt[6:8])
		off, more = int(fo&0x1fff)*8, fo&0x2000 != 0
		ky = key{id: uint32(binary.BigEndian.Uint16(pkt[4:6])), proto: pkt[9]}
		proto = pkt[9]
		copy(ky.src[:], pkt[12:16])
		copy(ky.dst[:], pkt[16:20])
		hdr = p.L4Off
	} else {
		// UpperLayer stopped right after the Fragment header (RFC 8200
		// §4.5): Next Header, reserved, offset and M, identification. The
		// Next Header of the first fragment is the datagram's: the
		// others' may differ, and do not part it.
		fh := pkt[p.L4Off-header.IPv6FragmentLen : p.L4Off]
		fo := binary.BigEndian.Uint16(fh[2:4])
		off, more = int(fo&^7), fo&1 != 0
		ky = key{id: binary.BigEndian.Uint32(fh[4:8]), v6: true}
		proto = fh[0]
		copy(ky.src[:], pkt[8:24])
		copy(ky.dst[:], pkt[24:40])
		// The payload length counts the unfragmentable extension
		// headers too.
		hdr = p.L4Off - header.IPv6FragmentLen - header.IPv6Len
	}
	ky.used = true
	data := pkt[p.L4Off:p.L3End]
	n := len(data)
	if more {
		if ky.v6 && n%8 != 0 {
			r.drops.Add(DropBadHeader, 1)
			return Datagram{}, false
		}
		n &^= 7 // RFC 791 §3.2: all but the last carry multiples of 8
	}
	if n == 0 {
		r.drops.Add(DropBadHeader, 1)
		return Datagram{}, false
	}
	end := off + n
	if hdr+end > MaxDatagramLen {
		r.drops.Add(DropTooBig, 1)
		return Datagram{}, false
	}
	if off == 0 && n < r.minFirst {
		r.drops.Add(DropTinyFirst, 1)
		return Datagram{}, false
	}
	h := r.keyHash(&ky)
	i := r.find(&ky, h, now)
	if i < 0 {
		i = r.start(&ky, h, now)
	}
	d := &r.slots[i]
	// The datagram's length (RFC 815: the last fragment fixes it).
	switch {
	case !more && (d.total >= 0 && int(d.total) != end || end < int(d.maxEnd)),
		more && d.total >= 0 && end > int(d.total):
		r.kill(i, DropInconsistent, 1)
		return Datagram{}, false
	}
	// Where the fragment falls among the runs received: runs[j] is the
	// first that ends at or after off, runs[k] the first that ends after
	// it (the only one it can lie within or overlap first).
	nr := int(d.nruns)
	j := 0
	for j < nr && int(d.runs[j].hi) < off {
		j++
	}
	left := j < nr && int(d.runs[j].hi) == off
	k := j
	if left {
		k = j + 1
	}
	if k < nr {
		ru := d.runs[k]
		if int(ru.lo) <= off && end <= int(ru.hi) {
			r.drops.Add(DropDuplicate, 1)
			return Datagram{}, false
		}
		if int(ru.lo) < end {
			r.kill(i, DropOverlap, 1)
			return Datagram{}, false
		}
	}
	right := k < nr && int(d.runs[k].lo) == end
	if !left && !right && nr == MaxRuns {
		r.kill(i, DropTooManyHoles, 1)
		return Datagram{}, false
	}
	if !r.pagesFor(i, off, end) {
		return Datagram{}, false
	}
	switch {
	case left && right:
		d.runs[j].hi = d.runs[k].hi
		copy(d.runs[k:nr], d.runs[k+1:nr])
		d.nruns--
	case left:
		d.runs[j].hi = int32(end)
	case right:
		d.runs[k].lo = int32(off)
	default:
		copy(d.runs[k+1:nr+1], d.runs[k:nr])
		d.runs[k] = run{int32(off), int32(end)}
		d.nruns++
	}
	r.write(d, off, data[:n])
	if off == 0 {
		d.proto = proto
	}
	d.frags++
	d.maxEnd = max(d.maxEnd, int32(end))
	if !more {
		d.total = int32(end)
	}
	if d.total < 0 || d.nruns != 1 || d.runs[0].lo != 0 || d.runs[0].hi != d.total {
		return Datagram{}, false
	}
	// Complete.
	total := int(d.total)
	r.read(d, r.out[:total])
	out := Datagram{Data: r.out[:total], Fragments: int(d.frags), Proto: d.proto}
	if ky.v6 {
		out.Src, out.Dst = netip.AddrFrom16(ky.src), netip.AddrFrom16(ky.dst)
	} else {
		out.Src, out.Dst = netip.AddrFrom4([4]byte(ky.src[:4])), netip.AddrFrom4([4]byte(ky.dst[:4]))
	}
	r.release(i)
	r.reassembled.Add(1)
	return out, true
}

// Expire drops the datagrams incomplete for longer than their timeout at
// now (ns) and returns how many.
func (r *Reassembler) Expire(now int64) int {
	n := 0
	for i := range r.keys {
		if r.keys[i].used && r.expired(i, now) {
			r.kill(i, DropTimeout, 0)
			n++
		}
	}
	return n
}

func (r *Reassembler) expired(i int, now int64) bool {
	t := r.timeout4
	if r.keys[i].v6 {
		t = r.timeout6
	}
	return now-r.slots[i].created >= t
}

// keyHash is k's hash under r's seed.
func (r *Reassembler) keyHash(k *key) uint64 {
	var b [2*16 + 4 + 2]byte
	copy(b[0:16], k.src[:])
	copy(b[16:32], k.dst[:])
	binary.LittleEndian.PutUint32(b[32:36], k.id)
	b[36] = k.proto
	if k.v6 {
		b[37] = 1
	}
	return maphash.Bytes(r.seed, b[:])
}

// find returns k's slot (h its hash), or -1; a datagram found timed out is
// dropped first (Expire may not have run since).
func (r *Reassembler) find(k *key, h uint64, now int64) int {
	for i := r.buckets[h&uint64(len(r.buckets)-1)]; i >= 0; i = r.next[i] {
		if r.hash[i] == h && r.keys[i] == *k {
			if r.expired(int(i), now) {
				r.kill(int(i), DropTimeout, 0)
				return -1
			}
			return int(i)
		}
	}
	return -1
}

// start takes a slot for k (h its hash), evicting the datagram started
// first when all are in use.
func (r *Reassembler) start(k *key, h uint64, now int64) int {
	if len(r.freeSlots) == 0 {
		r.kill(r.oldest(-1), DropTableFull, 0)
	}
	i := int(r.freeSlots[len(r.freeSlots)-1])
	r.freeSlots = r.freeSlots[:len(r.freeSlots)-1]
	r.keys[i] = *k
	r.hash[i] = h
	b := h & uint64(len(r.buckets)-1)
	r.next[i], r.buckets[b] = r.buckets[b], int32(i)
	r.older[i], r.newer[i] = r.last, -1
	if r.last >= 0 {
		r.newer[r.last] = int32(i)
	} else {
		r.first = int32(i)
	}
	r.last = int32(i)
	d := &r.slots[i]
	d.created, d.total, d.maxEnd, d.frags, d.nruns, d.npages, d.proto = now, -1, 0, 0, 0, 0, 0
	for p := range d.pages {
		d.pages[p] = -1
	}
	r.inProgress++
	r.inProg.Store(int64(r.inProgress))
	return i
}

// oldest returns the slot of the datagram started first other than
// except, or -1.
func (r *Reassembler) oldest(except int) int {
	o := int(r.first)
	if o == except && o >= 0 {
		o = int(r.newer[o])
	}
	return o
}

// pagesFor gives slot i the pages [off, end) falls in, evicting the oldest
// other datagrams while the arena has too few free; when even that is not
// enough, the datagram itself is dropped and pagesFor returns false.
func (r *Reassembler) pagesFor(i, off, end int) bool {
	d := &r.slots[i]
	need := 0
	for p := off / PageSize; p*PageSize < end; p++ {
		if d.pages[p] < 0 {
			need++
		}
	}
	for len(r.free) < need {
		o := r.oldest(i)
		if o < 0 {
			r.kill(i, DropMemoryFull, 1)
			return false
		}
		r.kill(o, DropMemoryFull, 0)
	}
	for p := off / PageSize; p*PageSize < end; p++ {
		if d.pages[p] < 0 {
			d.pages[p] = r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
			d.npages++
		}
	}
	r.held.Add(int64(need) * PageSize)
	return true
}

// write copies b into d's pages at offset off.
func (r *Reassembler) write(d *datagram, off int, b []byte) {
	for len(b) > 0 {
		p, in := off/PageSize, off%PageSize
		page := r.arena[int(d.pages[p])*PageSize : int(d.pages[p]+1)*PageSize]
		c := copy(page[in:], b)
		b, off = b[c:], off+c
	}
}

// read copies d's bytes [0, len(b)) into b.
func (r *Reassembler) read(d *datagram, b []byte) {
	for off := 0; off < len(b); off += PageSize {
		pg := int(d.pages[off/PageSize])
		copy(b[off:], r.arena[pg*PageSize:(pg+1)*PageSize])
	}
}

// kill drops slot i's datagram: its fragments and extra more (the one
// being added) counted under why.
func (r *Reassembler) kill(i int, why DropReason, extra int) {
	r.drops.Add(why, uint64(int(r.slots[i].frags)+extra))
	r.release(i)
}

// release frees slot i and its pages.
func (r *Reassembler) release(i int) {
	d := &r.slots[i]
	for p := range d.pages {
		if d.pages[p] >= 0 {
			r.free = append(r.free, d.pages[p])
			d.pages[p] = -1
		}
	}
	r.held.Add(-int64(d.npages) * PageSize)
	d.npages, d.frags, d.nruns = 0, 0, 0
	r.unlink(i)
	r.keys[i] = key{}
	r.freeSlots = append(r.freeSlots, int32(i))
	r.inProgress--
	r.inProg.Store(int64(r.inProgress))
}

// unlink takes slot i out of its bucket's chain and the start order.
func (r *Reassembler) unlink(i int) {
	b := r.hash[i] & uint64(len(r.buckets)-1)
	if r.buckets[b] == int32(i) {
		r.buckets[b] = r.next[i]
	} else {
		j := r.buckets[b]
		for r.next[j] != int32(i) {
			j = r.next[j]
		}
		r.next[j] = r.next[i]
	}
	o, n := r.older[i], r.newer[i]
	if o >= 0 {
		r.newer[o] = n
	} else {
		r.first = n
	}
	if n >= 0 {
		r.older[n] = o
	} else {
		r.last = o
	}
}
