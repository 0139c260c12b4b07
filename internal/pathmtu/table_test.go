package pathmtu

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
)

var peer = netip.MustParseAddr("2001:db8:f2::2")

// TestTableBounds: IPv4 endpoints are not kept, MaxEntries are, one more
// is refused, a known one still changes, and Least follows.
func TestTableBounds(t *testing.T) {
	var tb Table
	tb.Set(netip.MustParseAddr("198.18.0.9"), 600)
	if tb.Load() != nil {
		t.Fatalf("an IPv4 endpoint kept: %v", tb.All())
	}
	for i := range MaxEntries {
		if !tb.Set(netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x", i)), 1400) {
			t.Fatalf("entry %d refused", i)
		}
	}
	if tb.Set(peer, 1400) {
		t.Error("an entry past MaxEntries taken")
	}
	a := netip.MustParseAddr("2001:db8:1::7")
	if !tb.Set(a, 1300) || tb.Load().Least != 1300 {
		t.Errorf("a known entry: Least %d, want 1300", tb.Load().Least)
	}
	if m, ok := tb.Load().Lookup(a); !ok || m != 1300 {
		t.Errorf("Lookup = %d, %v", m, ok)
	}
}

// TestSetCostFull: with MaxEntries endpoints' path MTUs set, a change
// (an endpoint forgotten and another set, as internal/toobig's follower
// evicts the oldest for a new one) copies a part of the table, not all
// of it. Before, each copied the whole table: a flood of forged "packet
// too big", each about another address, cost about a millisecond and
// 900 KB of garbage each on the follower, a core at 1,000 errors a
// second.
func TestSetCostFull(t *testing.T) {
	var tb Table
	addr := func(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x:%x", i>>16, i&0xffff)) }
	for i := range MaxEntries {
		tb.Set(addr(i), 1400)
	}
	const changes = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range changes {
		tb.Set(addr(i), 0)
		if !tb.Set(addr(MaxEntries+i), 1300+i%100) {
			t.Fatalf("change %d refused", i)
		}
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / (2 * changes); per > 32<<10 {
		t.Errorf("%d bytes allocated per change with the table full, want at most 32 KiB", per)
	}
	all := tb.All()
	if len(all) != MaxEntries || all[addr(0)] != 0 || all[addr(MaxEntries)] != 1300 || all[addr(changes)] != 1400 {
		t.Errorf("%d entries, forgotten %d, new %d, kept %d; want %d, 0, 1300, 1400",
			len(all), all[addr(0)], all[addr(MaxEntries)], all[addr(changes)], MaxEntries)
	}
	s := tb.Load()
	if s.Least != 1300 {
		t.Errorf("Least = %d, want 1300", s.Least)
	}
	for a, want := range all {
		if m, ok := s.Lookup(a); !ok || m != want {
			t.Fatalf("Lookup(%v) = %d, %v; want %d", a, m, ok, want)
		}
	}
	if _, ok := s.Lookup(addr(1)); ok {
		t.Error("a forgotten endpoint found")
	}
	for a := range all {
		tb.Set(a, 0)
	}
	if tb.Load() != nil {
		t.Errorf("emptied table: %v", tb.All())
	}
}
