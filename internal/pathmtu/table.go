package pathmtu

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/header"
)

// MaxEntries is how many endpoints' path MTUs a Table keeps at once.
const MaxEntries = 4096

// shardBits is log2 of the shards a Snapshot's path MTUs are split into:
// a change copies one shard (about MaxEntries/64 entries at most, by a
// keyed hash), not the whole table.
const shardBits = 6

// Table holds the path MTUs learnt toward IPv6 endpoints, for a send path
// that reads it once per batch (Load) and a follower that changes it
// (Set). The zero Table is empty and ready. Safe for concurrent use.
type Table struct {
	mu sync.Mutex // serializes Set's copies
	n  int        // entries, under mu
	k1 uint64     // the shard hash's keys (odd; 0 until the first Set), under mu
	k2 uint64
	p  atomic.Pointer[Snapshot]
}

// Snapshot is an immutable state of a Table, replaced on each change;
// its shards are shared with the states before and after it but the one
// the change was in.
type Snapshot struct {
	// Least is the least MTU of the table, bytes of IP packet: packets
	// within it need no lookup.
	Least  int
	k1, k2 uint64
	shards [1 << shardBits]*shard
}

// shard is an immutable part of a Snapshot's path MTUs (nil: none).
type shard struct {
	least  int
	byAddr map[netip.Addr]int
}

// shardOf is the shard of the address a (16 bytes): a hash keyed by k1
// and k2, random per Table, so that errors about addresses chosen to land
// in one shard cannot make each change copy the whole table again.
func shardOf(a netip.Addr, k1, k2 uint64) int {
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	return int((hi*k1 + lo*k2) >> (64 - shardBits))
}

// Lookup returns the path MTU toward the endpoint address a (as 16
// bytes, no zone) and whether there is one.
func (s *Snapshot) Lookup(a netip.Addr) (int, bool) {
	sh := s.shards[shardOf(a, s.k1, s.k2)]
	if sh == nil {
		return 0, false
	}
	m, ok := sh.byAddr[a]
	return m, ok
}

// Load returns the table's current state, nil when it is empty: one
// atomic load.
func (t *Table) Load() *Snapshot { return t.p.Load() }

// Set sets the path MTU toward the IPv6 endpoint address dst, in bytes of
// IP packet, as an ICMPv6 "packet too big" from a router on the way
// reports it (RFC 8201 §4). An mtu below 1,280 is taken as 1,280, the
// least IPv6 link MTU (RFC 8200 §5; internal/toobig discards a "packet too
// big" reporting one, RFC 8201 §4); an mtu of 0 or less forgets dst's.
// IPv4 endpoints need none (the outer IPv4 header has DF clear: routers
// fragment it) and are ignored. It returns false, changing nothing, when
// MaxEntries endpoints have one already. It copies the part of the table
// dst is in, about a 64th of it (a cost per change, not per packet: a
// copy of the whole table per change made a flood of forged errors, each
// about another address, cost a millisecond and 900 KB each).
func (t *Table) Set(dst netip.Addr, mtu int) bool {
	dst = dst.Unmap()
	if !dst.Is6() {
		return true
	}
	dst = dst.WithZone("")
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.k1 == 0 {
		t.k1, t.k2 = rand.Uint64()|1, rand.Uint64()|1
	}
	old := t.p.Load()
	i := shardOf(dst, t.k1, t.k2)
	var oldSh *shard
	if old != nil {
		oldSh = old.shards[i]
	}
	_, known := lookupShard(oldSh, dst)
	switch {
	case mtu > 0 && !known && t.n >= MaxEntries:
		return false
	case mtu <= 0 && !known:
		return true
	}
	size := 0
	if oldSh != nil {
		size = len(oldSh.byAddr)
	}
	n := make(map[netip.Addr]int, size+1)
	if oldSh != nil {
		maps.Copy(n, oldSh.byAddr)
	}
	if mtu > 0 {
		n[dst] = max(mtu, header.IPv6MinMTU)
		if !known {
			t.n++
		}
	} else {
		delete(n, dst)
		t.n--
	}
	if t.n == 0 {
		t.p.Store(nil)
		return true
	}
	s := &Snapshot{k1: t.k1, k2: t.k2}
	if old != nil {
		s.shards = old.shards
	}
	s.shards[i] = nil
	if len(n) > 0 {
		sh := &shard{least: math.MaxInt, byAddr: n}
		for _, m := range n {
			sh.least = min(sh.least, m)
		}
		s.shards[i] = sh
	}
	s.Least = math.MaxInt
	for _, sh := range s.shards {
		if sh != nil {
			s.Least = min(s.Least, sh.least)
		}
	}
	t.p.Store(s)
	return true
}

func lookupShard(sh *shard, a netip.Addr) (int, bool) {
	if sh == nil {
		return 0, false
	}
	m, ok := sh.byAddr[a]
	return m, ok
}

// All returns a copy of the path MTUs, by endpoint address (nil: none).
func (t *Table) All() map[netip.Addr]int {
	s := t.p.Load()
	if s == nil {
		return nil
	}
	all := make(map[netip.Addr]int)
	for _, sh := range s.shards {
		if sh != nil {
			maps.Copy(all, sh.byAddr)
		}
	}
	return all
}
