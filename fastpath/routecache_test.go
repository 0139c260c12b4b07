package fastpath

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"
)

// TestRouteCacheMatchesTable: the cache answers exactly as the prefix
// table, for hits, misses, collisions and unrouted addresses, and follows
// a new snapshot at once.
func TestRouteCacheMatchesTable(t *testing.T) {
	pa, pb := &Peer{ID: 0}, &Peer{ID: 1}
	rt1 := newRouteTable(nil)
	rt1.t.Insert(netip.MustParsePrefix("198.19.0.0/16"), pa)
	rt1.t.Insert(netip.MustParsePrefix("198.19.7.0/24"), pb)
	rt1.t.Insert(netip.MustParsePrefix("2001:db8::/32"), pb)
	rt2 := newRouteTable(nil)
	rt2.t.Insert(netip.MustParsePrefix("198.19.0.0/16"), pb)

	rng := rand.New(rand.NewPCG(1, 2))
	addrs := make([]netip.Addr, 5000) // more than the cache holds: collisions
	for i := range addrs {
		if i%3 == 0 {
			var b [16]byte
			b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, byte(0xb8+rng.IntN(2))
			b[15] = byte(rng.IntN(256))
			addrs[i] = netip.AddrFrom16(b)
		} else {
			addrs[i] = netip.AddrFrom4([4]byte{198, byte(18 + rng.IntN(2)), byte(rng.IntN(16)), byte(rng.IntN(256))})
		}
	}
	var c routeCache
	for round := 0; round < 3; round++ {
		for _, rt := range []*routeTable{rt1, rt2, rt1} {
			for _, a := range addrs {
				gp, gok := c.lookup(rt, a)
				wp, wok := rt.t.Lookup(a)
				if gp != wp || gok != wok {
					t.Fatalf("lookup(%v) = %p %v, table says %p %v", a, gp, gok, wp, wok)
				}
			}
		}
	}
}

func BenchmarkRouteLookup(b *testing.B) {
	rt := newRouteTable(nil)
	p := &Peer{}
	rt.t.Insert(netip.MustParsePrefix("198.19.0.0/16"), p)
	a := netip.MustParseAddr("198.19.2.10")
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			rt.t.Lookup(a)
		}
	})
	b.Run("cache", func(b *testing.B) {
		var c routeCache
		for b.Loop() {
			c.lookup(rt, a)
		}
	})
}

// TestRouteCacheSize keeps routeCacheBits' doc comment true: 2^12 entries
// of 32 bytes, 128 KiB per direction.
func TestRouteCacheSize(t *testing.T) {
	var c routeCache
	if n := len(c.entries); n != 1<<12 {
		t.Errorf("route cache entries = %d, want %d", n, 1<<12)
	}
	if got := unsafe.Sizeof(c.entries); got != 128<<10 {
		t.Errorf("route cache size = %d bytes, want %d (128 KiB, as documented)", got, 128<<10)
	}
}
