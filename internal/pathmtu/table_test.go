package pathmtu

import (
	"fmt"
	"net/netip"
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
