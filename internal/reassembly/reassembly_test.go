package reassembly

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
)

var (
	src4, dst4 = netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1")
	src6, dst6 = netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("2001:db8::1")
)

// frag is one fragment to build: data at byte offset off (a multiple of
// 8) of datagram id, more for all but the last.
type frag struct {
	v6   bool
	id   uint32
	off  int
	more bool
	data []byte
	src  netip.Addr // default src4 / src6
}

// build makes the fragment's IP packet: an IPv4 header (protocol UDP) or
// an IPv6 header and Fragment header (Next Header UDP).
func (f frag) build() []byte {
	src := f.src
	if f.v6 {
		if !src.IsValid() {
			src = src6
		}
		b := make([]byte, header.IPv6Len+header.IPv6FragmentLen+len(f.data))
		h := header.IPv6Fields{NextHeader: header.ProtoFragment, HopLimit: 64, Src: src.As16(), Dst: dst6.As16()}
		header.PutIPv6(b, &h, header.IPv6FragmentLen+len(f.data))
		fh := b[header.IPv6Len:]
		fh[0] = header.ProtoUDP
		fo := uint16(f.off)
		if f.more {
			fo |= 1
		}
		binary.BigEndian.PutUint16(fh[2:4], fo)
		binary.BigEndian.PutUint32(fh[4:8], f.id)
		copy(b[header.IPv6Len+header.IPv6FragmentLen:], f.data)
		return b
	}
	if !src.IsValid() {
		src = src4
	}
	b := make([]byte, header.IPv4MinLen+len(f.data))
	h := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, ID: uint16(f.id), Src: src.As4(), Dst: dst4.As4()}
	header.PutIPv4(b, &h, len(f.data))
	fo := uint16(f.off / 8)
	if f.more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(b[6:8], fo)
	header.IPv4(b).SetChecksum()
	copy(b[header.IPv4MinLen:], f.data)
	return b
}

// payload returns n bytes that tell their offsets apart.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ byte(i>>8) ^ seed
	}
	return b
}

// split cuts data into fragments of size bytes (a multiple of 8).
func split(v6 bool, id uint32, data []byte, size int) []frag {
	var out []frag
	for off := 0; off < len(data); off += size {
		end := min(off+size, len(data))
		out = append(out, frag{v6: v6, id: id, off: off, more: end < len(data), data: data[off:end]})
	}
	return out
}

// feed adds the fragments in order and returns the datagrams completed.
func feed(r *Reassembler, now int64, fs ...frag) (got []Datagram) {
	for _, f := range fs {
		if d, ok := r.Add(f.build(), now); ok {
			d.Data = bytes.Clone(d.Data)
			got = append(got, d)
		}
	}
	return got
}

func families(t *testing.T, fn func(t *testing.T, v6 bool)) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) { fn(t, v6) })
	}
}

func wantDrops(t *testing.T, r *Reassembler, want map[DropReason]uint64) {
	t.Helper()
	got := r.Stats().Drops
	for k := range NumDropReasons {
		if got[k] != want[k] {
			t.Errorf("drops %v: %d, want %d (all: %v)", k, got[k], want[k], got.List())
		}
	}
}

func TestInOrder(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{MinFirst: 8})
		data := payload(3000, 1)
		got := feed(r, 0, split(v6, 7, data, 1232)...)
		if len(got) != 1 || !bytes.Equal(got[0].Data, data) || got[0].Fragments != 3 || got[0].Proto != header.ProtoUDP {
			t.Fatalf("got %d datagrams %+v, want the 3,000 bytes from 3 fragments", len(got), got)
		}
		wantSrc, wantDst := src4, dst4
		if v6 {
			wantSrc, wantDst = src6, dst6
		}
		if got[0].Src != wantSrc || got[0].Dst != wantDst {
			t.Errorf("addresses %v -> %v, want %v -> %v", got[0].Src, got[0].Dst, wantSrc, wantDst)
		}
		s := r.Stats()
		if s.Fragments != 3 || s.Reassembled != 1 || s.InProgress != 0 || s.BytesHeld != 0 || s.Drops.Total() != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestOutOfOrder(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		rng := rand.New(rand.NewPCG(1, 2))
		r := New(Config{})
		for i := range 50 {
			data := payload(200+rng.IntN(9000), byte(i))
			// 2 to 51 fragments: shuffled, they leave at most 26 runs
			// apart (MaxRuns).
			k := 2 + rng.IntN(50)
			fs := split(v6, uint32(i), data, 8*((len(data)+8*k-1)/(8*k)))
			rng.Shuffle(len(fs), func(a, b int) { fs[a], fs[b] = fs[b], fs[a] })
			got := feed(r, 0, fs...)
			if len(got) != 1 || !bytes.Equal(got[0].Data, data) {
				t.Fatalf("datagram %d of %d fragments shuffled: got %d datagrams", i, len(fs), len(got))
			}
		}
		if s := r.Stats(); s.Reassembled != 50 || s.Drops.Total() != 0 || s.InProgress != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestInterleaved: fragments of several datagrams, from two sources and
// with the same identification, mixed, each datagram whole.
func TestInterleaved(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{})
		a, b := payload(2000, 1), payload(2000, 2)
		fa, fb := split(v6, 9, a, 1000), split(v6, 9, b, 1000)
		other := netip.MustParseAddr("198.18.0.3")
		if v6 {
			other = netip.MustParseAddr("2001:db8::3")
		}
		for i := range fb {
			fb[i].src = other
		}
		got := feed(r, 0, fa[0], fb[1], fb[0], fa[1])
		if len(got) != 2 || !bytes.Equal(got[0].Data, b) || !bytes.Equal(got[1].Data, a) || got[0].Src != other {
			t.Fatalf("got %d datagrams", len(got))
		}
	})
}

// TestIPv6NextHeader: an IPv6 datagram's fragments are one by source,
// destination and identification, whatever their Fragment headers' Next
// Header (RFC 8200 §4.5); the first fragment's is the datagram's. IPv4
// keys the protocol too (RFC 791 §3.2).
func TestIPv6NextHeader(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{})
		data := payload(2000, 8)
		fs := split(v6, 5, data, 1000)
		pkts := [][]byte{fs[0].build(), fs[1].build()}
		if v6 {
			pkts[1][header.IPv6Len] = 59 // No Next Header in the later fragment
		} else {
			pkts[1][9] = header.ProtoTCP
			header.IPv4(pkts[1]).SetChecksum()
		}
		_, ok0 := r.Add(pkts[0], 0)
		d, ok := r.Add(pkts[1], 0)
		if ok0 || ok != v6 {
			t.Fatalf("completed %v, %v; want %v (IPv6 only)", ok0, ok, v6)
		}
		if v6 && (d.Proto != header.ProtoUDP || !bytes.Equal(d.Data, data)) {
			t.Errorf("proto %d, %d bytes; want UDP, the 2,000 bytes", d.Proto, len(d.Data))
		}
	})
}

// TestDuplicates: a fragment again, whole or within bytes held, is dropped
// alone (RFC 8200 §4.5; Linux's IPFRAG_DUP); the datagram completes.
func TestDuplicates(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{})
		data := payload(3000, 3)
		fs := split(v6, 1, data, 1000)
		inner := frag{v6: v6, id: 1, off: 8, more: true, data: data[8:800]}
		got := feed(r, 0, fs[0], fs[0], inner, fs[2], fs[2], fs[1])
		if len(got) != 1 || !bytes.Equal(got[0].Data, data) || got[0].Fragments != 3 {
			t.Fatalf("got %+v", got)
		}
		wantDrops(t, r, map[DropReason]uint64{DropDuplicate: 3})
	})
}

// TestOverlap: a fragment overlapping bytes held in part drops the whole
// datagram (RFC 5722; RFC 1858 §4, RFC 3128 for IPv4), its fragments
// counted; a later fragment starts a new one, which times out.
func TestOverlap(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{})
		data := payload(3000, 4)
		fs := split(v6, 1, data, 1000)
		// Rewrites bytes 992..1000 of the first fragment (the overlapping
		// fragment attack) and brings new ones.
		over := frag{v6: v6, id: 1, off: 992, more: true, data: data[992:1504]}
		if got := feed(r, 0, fs[0], fs[2], over, fs[1]); len(got) != 0 {
			t.Fatalf("completed a datagram with overlapping fragments: %+v", got)
		}
		wantDrops(t, r, map[DropReason]uint64{DropOverlap: 3})
		if s := r.Stats(); s.InProgress != 1 {
			t.Errorf("in progress %d, want 1 (the fragment after the overlap)", s.InProgress)
		}
		r.Expire(int64(time.Hour))
		wantDrops(t, r, map[DropReason]uint64{DropOverlap: 3, DropTimeout: 1})
		if s := r.Stats(); s.InProgress != 0 || s.BytesHeld != 0 {
			t.Errorf("after expiry: %+v", s)
		}
	})
}

// TestTimeout: a datagram incomplete past its family's timeout (30 s IPv4,
// 60 s IPv6) is dropped, by Expire or at its next fragment.
func TestTimeout(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		timeout := int64(DefaultTimeout4)
		if v6 {
			timeout = int64(DefaultTimeout6)
		}
		r := New(Config{})
		data := payload(3000, 5)
		fs := split(v6, 1, data, 1000)
		feed(r, 0, fs[0], fs[1])
		if n := r.Expire(timeout - 1); n != 0 {
			t.Fatalf("expired %d before the timeout", n)
		}
		if n := r.Expire(timeout); n != 1 {
			t.Fatalf("expired %d at the timeout, want 1", n)
		}
		wantDrops(t, r, map[DropReason]uint64{DropTimeout: 2})
		// Without Expire: the late fragment finds the datagram stale, drops
		// it and starts another.
		feed(r, 10*timeout, fs[0], fs[1])
		if got := feed(r, 11*timeout, fs[2]); len(got) != 0 {
			t.Fatalf("completed a datagram from fragments a timeout apart")
		}
		wantDrops(t, r, map[DropReason]uint64{DropTimeout: 4})
		if got := feed(r, 11*timeout+1, fs[0], fs[1]); len(got) != 1 || !bytes.Equal(got[0].Data, data) {
			t.Fatalf("fresh fragments did not complete the datagram")
		}
	})
}

// TestTableFull: with MaxDatagrams in progress, a new datagram evicts the
// oldest (table_full), the others still complete.
func TestTableFull(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{MaxDatagrams: 4})
		data := payload(2000, 6)
		for id := range uint32(5) {
			feed(r, int64(id), split(v6, id, data, 1000)[0])
		}
		wantDrops(t, r, map[DropReason]uint64{DropTableFull: 1})
		if got := feed(r, 10, split(v6, 0, data, 1000)[1]); len(got) != 0 {
			t.Fatal("the evicted datagram completed")
		}
		// It started again, and evicted the oldest, datagram 1.
		wantDrops(t, r, map[DropReason]uint64{DropTableFull: 2})
		for id := range uint32(3) {
			if got := feed(r, 10, split(v6, id+2, data, 1000)[1]); len(got) != 1 || !bytes.Equal(got[0].Data, data) {
				t.Fatalf("datagram %d did not complete", id+2)
			}
		}
		if got := feed(r, 10, split(v6, 1, data, 1000)[1]); len(got) != 0 {
			t.Fatal("the evicted datagram 1 completed")
		}
		if s := r.Stats(); s.InProgress != 2 || s.Reassembled != 3 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestMemoryFull: the arena holds MaxBytes; a fragment that finds no free
// page evicts the oldest other datagrams (memory_full).
func TestMemoryFull(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		// The least arena: one datagram's worth, 32 pages.
		r := New(Config{MaxBytes: 1})
		big := payload(20*PageSize, 7)
		fs := split(v6, 1, big, PageSize)
		feed(r, 0, fs[:19]...) // 19 pages of datagram 1
		if s := r.Stats(); s.BytesHeld != 19*PageSize {
			t.Fatalf("bytes held %d, want %d", s.BytesHeld, 19*PageSize)
		}
		other := split(v6, 2, big, PageSize)
		feed(r, 1, other[:14]...) // the 14th page evicts datagram 1
		wantDrops(t, r, map[DropReason]uint64{DropMemoryFull: 19})
		if s := r.Stats(); s.BytesHeld != 14*PageSize || s.InProgress != 1 {
			t.Fatalf("after eviction: %+v", s)
		}
		if got := feed(r, 2, other[14:]...); len(got) != 1 || !bytes.Equal(got[0].Data, big) {
			t.Fatal("datagram 2 did not complete")
		}
	})
}

// TestLimits: the header checks and the bounds of one datagram.
func TestLimits(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{MinFirst: 8})
		// Past 65,535 bytes of IP packet.
		feed(r, 0, frag{v6: v6, id: 1, off: 65528, more: false, data: make([]byte, 40)})
		// A first fragment too short for the UDP header (RFC 1858 §3).
		feed(r, 0, frag{v6: v6, id: 2, off: 0, more: true, data: make([]byte, 0)})
		feed(r, 0, frag{v6: v6, id: 3, off: 0, more: false, data: nil})
		// An empty fragment, and a packet that is no fragment.
		p := frag{v6: v6, id: 4, off: 0, more: false, data: make([]byte, 100)}.build()
		r.Add(p, 0)
		r.Add([]byte{0x45, 0}, 0)
		want := map[DropReason]uint64{DropTooBig: 1, DropBadHeader: 4}
		if v6 {
			// A non-last IPv6 fragment of a length not a multiple of 8.
			feed(r, 0, frag{v6: true, id: 5, off: 8, more: true, data: make([]byte, 13)})
			want[DropBadHeader]++
		}
		wantDrops(t, r, want)
		// A tiny first fragment (RFC 1858 §3): 8 bytes of data where the
		// upper-layer header takes 16.
		tiny := New(Config{MinFirst: 16})
		feed(tiny, 0, frag{v6: v6, id: 6, off: 0, more: true, data: make([]byte, 8)})
		wantDrops(t, tiny, map[DropReason]uint64{DropTinyFirst: 1})
		// A second last fragment ending elsewhere.
		feed(r, 0, frag{v6: v6, id: 7, off: 8, more: false, data: make([]byte, 8)}, frag{v6: v6, id: 7, off: 24, more: false, data: make([]byte, 8)})
		want[DropInconsistent] = 2
		// A fragment past the end the last one set.
		feed(r, 0, frag{v6: v6, id: 8, off: 8, more: false, data: make([]byte, 8)}, frag{v6: v6, id: 8, off: 16, more: true, data: make([]byte, 8)})
		want[DropInconsistent] += 2
		// Too many holes: every other 8 bytes.
		for i := range MaxRuns + 1 {
			feed(r, 0, frag{v6: v6, id: 9, off: 16 * (i + 1), more: true, data: make([]byte, 8)})
		}
		want[DropTooManyHoles] = MaxRuns + 1
		wantDrops(t, r, want)
		if s := r.Stats(); s.InProgress != 0 || s.BytesHeld != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestZeroAllocs: fragments are taken, held and given back without an
// allocation, IPv4 and IPv6, once the Reassembler is made.
func TestZeroAllocs(t *testing.T) {
	r := New(Config{MinFirst: 8})
	var pkts [][]byte
	for _, v6 := range []bool{false, true} {
		for _, f := range split(v6, 3, payload(4000, 9), 1232) {
			pkts = append(pkts, f.build())
		}
		// A duplicate and an overlap.
		pkts = append(pkts, frag{v6: v6, id: 3, off: 0, more: true, data: payload(1232, 9)}.build(),
			frag{v6: v6, id: 4, off: 0, more: true, data: payload(16, 1)}.build(),
			frag{v6: v6, id: 4, off: 8, more: true, data: payload(16, 1)}.build())
	}
	var done int
	now := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		for _, p := range pkts {
			if _, ok := r.Add(p, now); ok {
				done++
			}
		}
		now += int64(time.Minute) // the duplicate's datagram times out
		r.Expire(now)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per %d fragments", allocs, len(pkts))
	}
	if done != 2*101 {
		t.Errorf("%d datagrams completed, want %d", done, 2*101)
	}
}
