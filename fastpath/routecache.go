package fastpath

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"unsafe"
)

// A worker's allowed-IPs cache has 2^bits entries of 32 bytes,
// two-way set-associative (a set is the two entries of one 64-byte line,
// so that a look-up still loads one line; with traffic to 10,000 of
// 65,536 entries, about 14% of the addresses would share their one slot
// with another and miss every time, against 4% with sets of two):
// 2^routeCacheMinBits (128 KiB per direction per worker)
// up to 2^routeCacheMaxBits (2 MiB) when the table holds that many
// prefixes (routeCacheBits). A gateway with 100,000 peers and traffic to
// 10,000 of them at once then mostly hits: a prefix-table walk there is a
// chain of dependent cache misses, a hit one miss, which routeAhead takes
// for a whole burst at once.
const (
	routeCacheMinBits = 12
	routeCacheMaxBits = 16
)

// routeCacheBits is the size (log2 of the entries) of a cache for a table
// of n prefixes: about one entry per prefix, within the bounds above.
func routeCacheBits(n int) int {
	return min(max(bits.Len(uint(n)), routeCacheMinBits), routeCacheMaxBits)
}

// routeCache remembers the results of allowed-IPs lookups of one worker
// in one direction (destinations outbound, sources inbound). The traffic
// of a flow repeats its addresses, and a hit (a hash and one compare)
// costs a fraction of the prefix-table walk. Entries belong to one
// routeTable snapshot: each is tagged with the generation of the snapshot
// it was looked up in, and the generation changes when the worker sees a
// new snapshot, so the cache never answers with a stale configuration
// (and is not cleared: a change costs nothing here). It grows (once per
// doubling, up to 2^routeCacheMaxBits) when a snapshot has more prefixes;
// it never shrinks. Not safe for concurrent use; each worker owns its
// caches. The zero value is an empty cache.
type routeCache struct {
	rt      *routeTable
	gen     uint32 // generation of rt; entries of other generations are empty
	tag4    uint32 // gen<<1 | 1: the tag of rt's IPv4 entries (find4)
	shift   uint8  // 64 - log2(len(entries)/2): a hash's top bits pick the set
	entries []routeCacheEntry
}

type routeCacheEntry struct {
	// lo, and hi for IPv6, are the address (key4, key6). An IPv4 entry's
	// key is lo alone (its tag tells it from every IPv6 entry's), and its
	// hi is the address of the keypair its peer last sent with, as
	// outbound last saw it (setHint; 0: none): a hint that routeAhead
	// prefetches beside the peer's lines, never dereferenced and keeping
	// nothing alive (a keypair retired since makes it a useless
	// prefetch, nothing more).
	hi, lo uint64
	peer   *Peer  // nil: no route
	tag    uint32 // gen<<1 | 1 for IPv4; 0: never used
	// id is peer.ID when the entry was made (0 without a peer): outbound
	// finds its peerLocal by it (worker.metAt) without waiting for the
	// Peer's line, one dependent cache miss fewer per peer of a burst.
	id uint32
}

// lookup returns the peer whose allowed IPs hold a in rt, as
// rt.t.Lookup(a) would; ok is false when none does.
func (c *routeCache) lookup(rt *routeTable, a netip.Addr) (*Peer, bool) {
	p, _, ok := c.lookupID(rt, a)
	return p, ok
}

// lookupID is lookup that also returns the peer's ID as the cache holds
// it (the peer's ID when the entry was made; 0 without a peer).
func (c *routeCache) lookupID(rt *routeTable, a netip.Addr) (*Peer, uint32, bool) {
	c.use(rt)
	var hi, lo uint64
	v4 := a.Is4()
	if v4 {
		lo = key4(a)
	} else {
		hi, lo = key6(a)
	}
	tag := c.gen << 1
	if v4 {
		tag |= 1
	}
	set := c.set(hi, lo, v4)
	// (An IPv4 entry's hi is its keypair hint, not part of its key.)
	if e := &set[0]; (v4 || e.hi == hi) && e.lo == lo && e.tag == tag {
		return e.peer, e.id, e.peer != nil
	}
	if e := &set[1]; (v4 || e.hi == hi) && e.lo == lo && e.tag == tag {
		return e.peer, e.id, e.peer != nil
	}
	// The newest in the first entry, the one it replaces in the second
	// (what was there leaves).
	p, ok := rt.t.Lookup(a)
	set[1] = set[0]
	set[0] = routeCacheEntry{hi: hi, lo: lo, peer: p, tag: tag}
	if p != nil {
		set[0].id = uint32(p.ID)
	}
	return p, set[0].id, ok
}

// find4 is lookup's common path for an IPv4 address (a4, big-endian),
// small enough to be inlined (outbound takes it for every frame), for a
// cache in use for the snapshot (use): the peer held for a4 by its set's
// newer entry (nil: no route) and its ID when the entry was made, and
// hit = false when that entry is of another address or generation
// (lookup then looks further).
func (c *routeCache) find4(a4 uint32) (p *Peer, id uint32, hit bool) {
	// The set is entries[2*i : 2*i+2] for i = the hash's top bits, below
	// len(entries)/2 (shift); entries was made when the snapshot came
	// into use (renew). As set and key4 compute them.
	e := c.set4(a4)
	return e.peer, e.id, e.lo == 0xffff<<32|uint64(a4) && e.tag == c.tag4
}

// use makes rt the cache's snapshot: a new generation (entries of older
// snapshots no longer match), and a larger cache if rt has more prefixes
// than the cache was sized for.
func (c *routeCache) use(rt *routeTable) {
	if c.rt != rt { // once per snapshot: the rest stays out of line
		c.renew(rt)
	}
}

//go:noinline
func (c *routeCache) renew(rt *routeTable) {
	c.rt = rt
	if b := routeCacheBits(rt.t.Size()); len(c.entries) < 1<<b {
		// Once per doubling of the configuration: a new, empty cache.
		// (A large object: its pages keep each set on one line.)
		c.entries = make([]routeCacheEntry, 1<<b)
		c.shift = uint8(64 - (b - 1))
		c.gen = 0
	}
	c.gen++
	if c.gen >= 1<<31 {
		// The tags would wrap: start again from an empty cache.
		clear(c.entries)
		c.gen = 1
	}
	c.tag4 = c.gen<<1 | 1
}

// An address's cache key is its 16 bytes (an IPv4 address mapped),
// big-endian, so that the last octets, which differ most between
// neighbouring hosts, are the low bits the hash mixes upward: key4 and
// key6.

// key4 is the low half of an IPv4 address's key, ::ffff:a.b.c.d as As16
// gives (the high half is 0), without As16's 16-byte round trip through
// memory (two 8-byte stores read back by one 16-byte load, a
// store-forwarding stall per lookup).
func key4(a netip.Addr) uint64 {
	b := a.As4()
	return 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:]))
}

// key6 is an IPv6 address's key.
func key6(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// set is the cache set of the address with key hi, lo, v4 (Fibonacci
// hashing: the top bits of the product are the well-mixed ones, and
// neighbouring hosts spread evenly). An IPv4 address is hashed as the
// 32-bit number it is, its last octet lowest: byte-reversed, the octet
// that varies between neighbours lay in bits 24-31 of the key, and the
// top bits of its product took 10,000 consecutive hosts to 3,500 slots of
// 65,536, nine in ten of them sharing one (TestRouteCacheSpread).
func (c *routeCache) set(hi, lo uint64, v4 bool) *[2]routeCacheEntry {
	var h uint64
	if v4 {
		h = uint64(uint32(lo)) * 0x9e3779b97f4a7c15
	} else {
		h = (bits.ReverseBytes64(hi)*0x9e3779b97f4a7c15 ^ bits.ReverseBytes64(lo)) * 0xbf58476d1ce4e5b9
	}
	i := 2 * (h >> c.shift)
	return (*[2]routeCacheEntry)(c.entries[i : i+2])
}

// set4 is the first entry of the set of the IPv4 address a4 (big-endian):
// find4's, and set's for the address.
func (c *routeCache) set4(a4 uint32) *routeCacheEntry {
	i := uintptr((uint64(a4) * 0x9e3779b97f4a7c15) >> (c.shift & 63)) // (& 63: no check of the shift's range)
	return (*routeCacheEntry)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c.entries)), 2*i*unsafe.Sizeof(routeCacheEntry{})))
}

// setHint records h, the address of the keypair the peer of the IPv4
// address a4 (big-endian) sends with, in a4's entry of the cache set set
// (routeAheadFrame.set) if the entry is still there: the next burst's
// routeAhead prefetches the keypair's send line with the peer's lines,
// one level of cache misses earlier than warm, which must load the
// peer's Current first (BenchmarkManyPeers at 100,000 peers: about 1%
// on the ratio, ahead in 22 of 30 alternating pairs on a shared VM;
// docs/performance.md, 6 December).
func (c *routeCache) setHint(set int32, a4 uint32, h uintptr) {
	i := 2 * int(set)
	e := (*[2]routeCacheEntry)(c.entries[i : i+2])
	for k := range e {
		if e[k].lo == 0xffff<<32|uint64(a4) && e[k].tag == c.tag4 {
			e[k].hi = uint64(h)
			return
		}
	}
}
