package pathmtu

import (
	"maps"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/header"
)

// MaxEntries is how many endpoints' path MTUs a Table keeps at once.
const MaxEntries = 4096

// Table holds the path MTUs learnt toward IPv6 endpoints, for a send path
// that reads it once per batch (Load) and a follower that changes it
// (Set). The zero Table is empty and ready. Safe for concurrent use.
type Table struct {
	mu sync.Mutex // serializes Set's copies
	p  atomic.Pointer[Snapshot]
}

// Snapshot is an immutable state of a Table, replaced whole on each
// change.
type Snapshot struct {
	// Least is the least MTU of the table, bytes of IP packet: packets
	// within it need no lookup.
	Least  int
	byAddr map[netip.Addr]int
}

// Lookup returns the path MTU toward the endpoint address a (as 16
// bytes, no zone) and whether there is one.
func (s *Snapshot) Lookup(a netip.Addr) (int, bool) {
	m, ok := s.byAddr[a]
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
// MaxEntries endpoints have one already. It copies the table (a cost per
// change, not per packet).
func (t *Table) Set(dst netip.Addr, mtu int) bool {
	dst = dst.Unmap()
	if !dst.Is6() {
		return true
	}
	dst = dst.WithZone("")
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.p.Load()
	n := make(map[netip.Addr]int)
	if old != nil {
		if _, ok := old.byAddr[dst]; !ok && mtu > 0 && len(old.byAddr) >= MaxEntries {
			return false
		}
		maps.Copy(n, old.byAddr)
	}
	if mtu > 0 {
		n[dst] = max(mtu, header.IPv6MinMTU)
	} else {
		delete(n, dst)
	}
	if len(n) == 0 {
		t.p.Store(nil)
		return true
	}
	s := &Snapshot{Least: math.MaxInt, byAddr: n}
	for _, m := range n {
		s.Least = min(s.Least, m)
	}
	t.p.Store(s)
	return true
}

// All returns a copy of the path MTUs, by endpoint address (nil: none).
func (t *Table) All() map[netip.Addr]int {
	s := t.p.Load()
	if s == nil {
		return nil
	}
	return maps.Clone(s.byAddr)
}
