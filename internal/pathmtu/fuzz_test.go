package pathmtu

import (
	"maps"
	"math"
	"net/netip"
	"testing"
)

// FuzzTable applies a sequence of Sets (an address of 32, an MTU from
// 1,270 up or 0 to forget, or an IPv4-mapped one) to a Table and to a
// plain map: after each, the snapshot holds the map's entries exactly
// (Lookup, All), its Least is their least, an empty table loads nil, and
// a snapshot loaded before the Set still holds what it held (snapshots
// share shards and are immutable).
//
//	go test ./internal/pathmtu -run '^$' -fuzz FuzzTable -fuzztime 60s
func FuzzTable(f *testing.F) {
	f.Add([]byte{1, 30, 2, 10, 1, 0, 2, 0, 3, 200, 3, 5})
	f.Add([]byte{0x21, 40, 1, 40, 0x21, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tb Table
		model := map[netip.Addr]int{}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 7: op >> 5, 15: op & 31})
			if op&0x80 != 0 {
				a = netip.AddrFrom4([4]byte{198, 18, 0, op & 31})
			}
			mtu := 1270 + int(arg)
			if arg == 0 {
				mtu = 0
			}
			before := tb.Load()
			var held map[netip.Addr]int
			if before != nil {
				held = all(before)
			}
			if !tb.Set(a, mtu) {
				t.Fatalf("Set(%v, %d) refused with %d entries", a, mtu, len(model))
			}
			if a.Is6() {
				if mtu > 0 {
					model[a] = max(mtu, 1280)
				} else {
					delete(model, a)
				}
			}
			if before != nil && !maps.Equal(all(before), held) {
				t.Fatalf("Set(%v, %d) changed an earlier snapshot: %v, was %v", a, mtu, all(before), held)
			}
			s := tb.Load()
			if len(model) == 0 {
				if s != nil {
					t.Fatalf("empty table loads %v", all(s))
				}
				continue
			}
			least := math.MaxInt
			for a, m := range model {
				least = min(least, m)
				if got, ok := s.Lookup(a); !ok || got != m {
					t.Fatalf("Lookup(%v) = %d, %v; want %d", a, got, ok, m)
				}
			}
			if s.Least != least {
				t.Fatalf("Least %d, want %d (%v)", s.Least, least, model)
			}
			if got := tb.All(); !maps.Equal(got, model) {
				t.Fatalf("All = %v, want %v", got, model)
			}
			if tb.n != len(model) {
				t.Fatalf("n = %d, want %d", tb.n, len(model))
			}
		}
	})
}

func all(s *Snapshot) map[netip.Addr]int {
	m := map[netip.Addr]int{}
	for _, sh := range s.shards {
		if sh != nil {
			maps.Copy(m, sh.byAddr)
		}
	}
	return m
}
