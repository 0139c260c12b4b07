package fastpath

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestRouteCacheMatchesTable: the cache answers exactly as the prefix
// table, for hits, misses, collisions and unrouted addresses, and follows
// a new snapshot at once; so does find4 (outbound's inline path) whenever
// it reports a hit, and it hits an IPv4 address just looked up.
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
	n4, hits4 := 0, 0
	for round := 0; round < 3; round++ {
		for _, rt := range []*routeTable{rt1, rt2, rt1} {
			c.use(rt)
			for _, a := range addrs {
				wp, wok := rt.t.Lookup(a)
				var a4 uint32
				if a.Is4() {
					b := a.As4()
					a4 = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
					if fp, id, hit := c.find4(a4); hit && (fp != wp || (fp != nil && int(id) != fp.ID)) {
						t.Fatalf("find4(%v) = %p ID %d (hit), table says %p", a, fp, id, wp)
					}
				}
				gp, gok := c.lookup(rt, a)
				if gp != wp || gok != wok {
					t.Fatalf("lookup(%v) = %p %v, table says %p %v", a, gp, gok, wp, wok)
				}
				if a.Is4() {
					// A miss put a4 in its set's newer entry; a hit
					// in the older one leaves it there (find4 misses).
					fp, id, hit := c.find4(a4)
					if hit && (fp != wp || (fp != nil && int(id) != fp.ID)) {
						t.Fatalf("find4(%v) after lookup = %p ID %d, table says %p", a, fp, id, wp)
					}
					n4++
					if hit {
						hits4++
					}
				}
			}
		}
	}
	if hits4 < n4*9/10 {
		t.Errorf("find4 hit %d of %d IPv4 addresses just looked up, want most", hits4, n4)
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

// TestRouteCacheSize keeps the doc comment of routeCacheMinBits true:
// entries of 32 bytes, 2^12 of them (128 KiB) for a small table, 2^16
// (2 MiB) at most, and a cache that grows with the table it serves and
// still answers as the table does after it grew.
func TestRouteCacheSize(t *testing.T) {
	if s := unsafe.Sizeof(routeCacheEntry{}); s != 32 {
		t.Errorf("route cache entry = %d bytes, want 32", s)
	}
	for _, c := range []struct{ prefixes, bits int }{{0, 12}, {4, 12}, {4096, 13}, {20000, 15}, {200000, 16}} {
		if b := routeCacheBits(c.prefixes); b != c.bits {
			t.Errorf("routeCacheBits(%d) = %d, want %d", c.prefixes, b, c.bits)
		}
	}
	small, big := newRouteTable(nil), newRouteTable(nil)
	p := &Peer{}
	small.t.Insert(netip.MustParsePrefix("10.0.0.0/8"), p)
	for i := range 20000 {
		big.t.Insert(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32), p)
	}
	var c routeCache
	a := netip.MustParseAddr("10.1.0.7")
	if got, ok := c.lookup(small, a); got != p || !ok {
		t.Fatalf("small table: lookup(%v) = %p %v", a, got, ok)
	}
	if n := len(c.entries); n != 1<<12 {
		t.Errorf("cache of a 1-prefix table: %d entries, want %d", n, 1<<12)
	}
	if got, ok := c.lookup(big, a); got != p || !ok {
		t.Fatalf("big table: lookup(%v) = %p %v", a, got, ok)
	}
	if n := len(c.entries); n != 1<<15 {
		t.Errorf("cache of a 20,000-prefix table: %d entries, want %d", n, 1<<15)
	}
	if got, ok := c.lookup(big, netip.MustParseAddr("10.2.0.1")); got != nil || ok {
		t.Errorf("big table: lookup(10.2.0.1) = %p %v, want no route", got, ok)
	}
	// Back to the small table: a new generation, nothing of the big
	// table's answers, in the cache it has (it does not shrink).
	if got, ok := c.lookup(small, netip.MustParseAddr("10.2.0.1")); got != p || !ok {
		t.Errorf("small table again: lookup(10.2.0.1) = %p %v, want the /8's peer", got, ok)
	}
	if n := len(c.entries); n != 1<<15 {
		t.Errorf("cache after a smaller table: %d entries, want %d", n, 1<<15)
	}
	// A new snapshot of the same size (every configuration change
	// makes one) keeps the cache: it was made anew (128 KiB to 2 MiB a
	// direction and worker) each time.
	var fresh routeCache
	fresh.lookup(small, a)
	first := &fresh.entries[0]
	for range 5 {
		again := newRouteTable(nil)
		again.t.Insert(netip.MustParsePrefix("10.0.0.0/8"), p)
		fresh.lookup(again, a)
	}
	if &fresh.entries[0] != first || len(fresh.entries) != 1<<12 {
		t.Errorf("new snapshots of no more prefixes made a new cache (%d entries)", len(fresh.entries))
	}
}

// TestAheadDst: routeAhead reads the destination pass 1 parses, for IPv4
// and IPv6, untagged and tagged, and nothing from a frame too short.
func TestAheadDst(t *testing.T) {
	for _, c := range []struct {
		dst  netip.Addr
		vlan uint16
	}{
		{netip.MustParseAddr("198.19.2.10"), 0},
		{netip.MustParseAddr("198.19.2.10"), 7},
		{netip.MustParseAddr("2001:db8:2::10"), 0},
		{netip.MustParseAddr("2001:db8:2::10"), 7},
	} {
		b := make([]byte, 128)
		et := uint16(header.EtherTypeIPv4)
		if c.dst.Is6() {
			et = header.EtherTypeIPv6
		}
		l2 := putEthernet(b, header.MAC{}, header.MAC{}, c.vlan, et)
		if c.dst.Is4() {
			header.PutIPv4(b[l2:], &header.IPv4Fields{Protocol: header.ProtoUDP, Src: [4]byte{1, 2, 3, 4}, Dst: c.dst.As4()}, 8)
		} else {
			header.PutIPv6(b[l2:], &header.IPv6Fields{NextHeader: header.ProtoUDP, Dst: c.dst.As16()}, 8)
		}
		var p header.Packet
		if r := header.Parse(b, &p); !r.IPHeaderOK() {
			t.Fatalf("%v vlan %d: Parse: %v", c.dst, c.vlan, r)
		}
		if got := aheadDst(b); got != p.Dst || got != c.dst {
			t.Errorf("%v vlan %d: aheadDst = %v, Parse = %v", c.dst, c.vlan, got, p.Dst)
		}
		if got := aheadDst(b[:l2+10]); got.IsValid() {
			t.Errorf("%v vlan %d: aheadDst of a cut frame = %v, want none", c.dst, c.vlan, got)
		}
	}
}

// TestRouteCacheTwoWays: two addresses whose keys pick the same set are
// both kept (each answers from its entry, with its own peer), a third
// one takes the place of the older, and every set lies on one 64-byte
// line.
func TestRouteCacheTwoWays(t *testing.T) {
	rt := newRouteTable(nil)
	var c routeCache
	c.use(rt)
	if uintptr(unsafe.Pointer(&c.entries[0]))%64 != 0 {
		t.Errorf("route cache entries start %d bytes into a line", uintptr(unsafe.Pointer(&c.entries[0]))%64)
	}
	// Three addresses of one set.
	var same []netip.Addr
	first := c.set(0, key4(netip.AddrFrom4([4]byte{10, 0, 0, 0})), true)
	for i := 0; len(same) < 3 && i < 1<<24; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if c.set(0, key4(a), true) == first {
			same = append(same, a)
		}
	}
	if len(same) < 3 {
		t.Fatal("no three addresses of one set")
	}
	peers := []*Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for i, a := range same {
		rt.t.Insert(netip.PrefixFrom(a, 32), peers[i])
	}
	for i := range 2 {
		if p, ok := c.lookup(rt, same[i]); p != peers[i] || !ok {
			t.Fatalf("lookup(%v) = %v %v", same[i], p, ok)
		}
	}
	key := func(a netip.Addr) routeCacheEntry {
		p := peers[slices.Index(same, a)]
		return routeCacheEntry{lo: key4(a), peer: p, tag: c.gen<<1 | 1, id: uint32(p.ID)}
	}
	if *first != [2]routeCacheEntry{key(same[1]), key(same[0])} {
		t.Errorf("set after two look-ups: %+v, want both addresses (newest first)", *first)
	}
	c.lookup(rt, same[2])
	if *first != [2]routeCacheEntry{key(same[2]), key(same[1])} {
		t.Errorf("set after a third: %+v, want the third and the second", *first)
	}
	for i, a := range same {
		if p, ok := c.lookup(rt, a); p != peers[i] || !ok {
			t.Errorf("lookup(%v) = %v %v, want peer %d", a, p, ok, i+1)
		}
	}
}

// TestRouteCacheSpread: the allowed IPs of a gateway's peers are often
// consecutive host addresses; 10,000 of them (IPv4, and IPv6 in the last
// bytes) in a cache of 2^16 entries must not crowd into shared sets, where
// they would evict each other and miss on every look-up (hashing the
// IPv4 address byte-reversed left them in 3,500 slots, 92% of them shared).
func TestRouteCacheSpread(t *testing.T) {
	big := newRouteTable(nil)
	for i := range 1 << 15 { // a cache of 2^16 entries
		big.t.Insert(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), &Peer{})
	}
	var c routeCache
	c.use(big)
	if len(c.entries) != 1<<16 {
		t.Fatalf("%d entries, want %d", len(c.entries), 1<<16)
	}
	for _, base := range []netip.Addr{netip.MustParseAddr("198.18.4.0"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00:5ca1::1")} {
		count := map[*[2]routeCacheEntry]int{}
		a := base
		for range 10000 {
			if a.Is4() {
				count[c.set(0, key4(a), true)]++
			} else {
				hi, lo := key6(a)
				count[c.set(hi, lo, false)]++
			}
			a = a.Next()
		}
		over := 0
		for _, n := range count {
			if n > 2 {
				over += n
			}
		}
		if over > 100 {
			t.Errorf("10,000 addresses from %v: %d in %d sets, %d of them in sets of more than two", base, 10000, len(count), over)
		}
	}
}

// TestRouteAheadMatchesTable: on a table large enough for the outbound
// look-ahead, routeAhead's answer for every frame of mixed bursts
// (untagged and tagged IPv4, IPv6, runs of one address, addresses no
// prefix holds, 0.0.0.0, frames that are not IP or are cut short) is the
// prefix table's for the address pass 1 parses, with the peer's ID, and
// none for a frame without one; bursts repeat, so that both the cache's
// misses and its hits (find4, inline) are checked.
func TestRouteAheadMatchesTable(t *testing.T) {
	const npeers = 5000 // 10,000 prefixes: at least aheadMinPrefixes
	pr := newManyPeersRig(t, npeers, 1)
	w := pr.r.a.workers[0]
	rt := pr.r.a.routes.Load()
	if rt.t.Size() < aheadMinPrefixes {
		t.Fatalf("%d prefixes, want at least %d", rt.t.Size(), aheadMinPrefixes)
	}
	tx := pr.r.hostA.Queue(0).TX()
	frames := make([]dataplane.Frame, 64)
	rng := rand.New(rand.NewPCG(3, 4))
	frame := func(f *dataplane.Frame) {
		var dst netip.Addr
		switch k := rng.IntN(10); {
		case k < 5:
			dst = manyAddr(rng.IntN(npeers))
		case k < 7:
			dst = manyAddr6(rng.IntN(npeers))
		case k == 7:
			dst = netip.AddrFrom4([4]byte{198, 19, byte(rng.IntN(256)), byte(rng.IntN(256))}) // no route
		default:
			dst = netip.IPv4Unspecified()
		}
		vlan := uint16(0)
		if rng.IntN(4) == 0 {
			vlan = 7
		}
		b := f.Data()[:cap(f.Data())]
		et := uint16(header.EtherTypeIPv4)
		if dst.Is6() {
			et = header.EtherTypeIPv6
		}
		if rng.IntN(20) == 0 {
			et = 0x0806 // not IP
		}
		l2 := putEthernet(b, header.MAC{}, header.MAC{}, vlan, et)
		if dst.Is4() {
			header.PutIPv4(b[l2:], &header.IPv4Fields{Protocol: header.ProtoUDP, Src: [4]byte{1, 2, 3, 4}, Dst: dst.As4()}, 8)
		} else {
			header.PutIPv6(b[l2:], &header.IPv6Fields{NextHeader: header.ProtoUDP, Dst: dst.As16()}, 8)
		}
		n := l2 + 48
		if dst.Is4() {
			n = l2 + 28
		}
		if rng.IntN(20) == 0 {
			n = l2 + rng.IntN(20) // cut short
		}
		f.SetLen(n)
	}
	checked := 0
	for burst := range 200 {
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			if i > 0 && rng.IntN(4) == 0 { // a run: the frame before again
				f := frames[i-1].Data()
				frames[i].SetLen(len(f))
				copy(frames[i].Data(), f)
				continue
			}
			frame(&frames[i])
		}
		w.routeAhead(rt, frames[:n])
		for i := range frames[:n] {
			var p header.Packet
			want := netip.Addr{}
			if r := header.Parse(frames[i].Data(), &p); r.IPHeaderOK() {
				want = p.Dst
			}
			a := &w.ahead[i]
			got := a.addr()
			if want.IsValid() && got != want {
				t.Fatalf("burst %d frame %d: routeAhead read %v, Parse %v", burst, i, got, want)
			}
			// The inline path (a key) takes untagged IPv4 alone.
			d := frames[i].Data()
			v4 := len(d) >= header.EthernetLen+header.IPv4MinLen && binary.BigEndian.Uint16(d[12:14]) == header.EtherTypeIPv4
			if keyed := a.set != aheadOther; keyed != v4 {
				t.Fatalf("burst %d frame %d (%v): keyed %v (set %d), untagged IPv4 %v", burst, i, got, keyed, a.set, v4)
			}
			if !got.IsValid() {
				if a.peer != nil {
					t.Fatalf("burst %d frame %d: no address, peer %p", burst, i, a.peer)
				}
				continue
			}
			wp, _ := rt.t.Lookup(got)
			if gp := a.peer; gp != wp || (gp != nil && int(a.id) != gp.ID) {
				t.Fatalf("burst %d frame %d (%v): routeAhead %p ID %d, table %p", burst, i, got, gp, a.id, wp)
			}
			checked++
		}
		tx.Free(frames[:n])
	}
	if checked < 200*64/2 {
		t.Errorf("checked %d frames, want most of %d", checked, 200*64)
	}
}
