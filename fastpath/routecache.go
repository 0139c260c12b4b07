package fastpath

import (
	"encoding/binary"
	"net/netip"
)

// routeCacheBits sizes a worker's allowed-IPs cache: 2^12 entries of 32
// bytes (a netip.Addr and a pointer), 128 KiB per direction per worker,
// direct-mapped.
const routeCacheBits = 12

// routeCache remembers the results of allowed-IPs lookups of one worker
// in one direction (destinations outbound, sources inbound). The traffic
// of a flow repeats its addresses, and a hit (a hash and one compare)
// costs a fraction of the prefix-table walk. Entries belong to one
// routeTable snapshot: the cache is emptied when the worker sees a new
// one, so it never answers with a stale configuration. Not safe for
// concurrent use; each worker owns its caches.
type routeCache struct {
	rt      *routeTable
	entries [1 << routeCacheBits]routeCacheEntry
}

type routeCacheEntry struct {
	addr netip.Addr // the zero Addr (never looked up) marks an empty entry
	peer *Peer      // nil: no route
}

// lookup returns the peer whose allowed IPs hold a in rt, as
// rt.t.Lookup(a) would; ok is false when none does.
func (c *routeCache) lookup(rt *routeTable, a netip.Addr) (*Peer, bool) {
	if c.rt != rt {
		c.entries = [1 << routeCacheBits]routeCacheEntry{}
		c.rt = rt
	}
	e := &c.entries[addrHash(a)>>(64-routeCacheBits)]
	if e.addr == a {
		return e.peer, e.peer != nil
	}
	p, ok := rt.t.Lookup(a)
	e.addr, e.peer = a, p
	return p, ok
}

// addrHash mixes an address's bits (Fibonacci hashing: the top bits of the
// product are the well-mixed ones).
func addrHash(a netip.Addr) uint64 {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.LittleEndian.Uint32(b[:])) * 0x9e3779b97f4a7c15
	}
	b := a.As16()
	return (binary.LittleEndian.Uint64(b[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(b[8:])) * 0xbf58476d1ce4e5b9
}
