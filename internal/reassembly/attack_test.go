package reassembly

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// checkBooks checks the Reassembler's books against its state: every
// fragment given to Add is reassembled, dropped or held (done counts the
// fragments of the datagrams completed); InProgress and BytesHeld are
// the slots in use and the pages they own; every page is free or owned
// by one datagram, once.
func checkBooks(t *testing.T, r *Reassembler, done uint64) {
	t.Helper()
	s := r.Stats()
	var held uint64
	var used, pages int
	owner := make([]int, len(r.arena)/PageSize)
	for i := range owner {
		owner[i] = -1
	}
	for i := range r.keys {
		d := &r.slots[i]
		if !r.keys[i].used {
			if d.frags != 0 || d.npages != 0 {
				t.Fatalf("free slot %d holds %d fragments, %d pages", i, d.frags, d.npages)
			}
			continue
		}
		used++
		held += uint64(d.frags)
		n := 0
		for _, pg := range d.pages {
			if pg < 0 {
				continue
			}
			if owner[pg] >= 0 {
				t.Fatalf("page %d owned by slots %d and %d", pg, owner[pg], i)
			}
			owner[pg] = i
			n++
		}
		if n != int(d.npages) {
			t.Fatalf("slot %d: %d pages, npages %d", i, n, d.npages)
		}
		pages += n
	}
	checkIndex(t, r, used)
	for _, pg := range r.free {
		if owner[pg] != -1 {
			t.Fatalf("page %d free and owned by slot %d", pg, owner[pg])
		}
		owner[pg] = -2
	}
	for pg, o := range owner {
		if o == -1 {
			t.Fatalf("page %d lost: neither free nor owned", pg)
		}
	}
	if int(s.InProgress) != used || used != r.inProgress {
		t.Fatalf("in progress %d (%d), %d slots in use", s.InProgress, r.inProgress, used)
	}
	if s.BytesHeld != uint64(pages)*PageSize {
		t.Fatalf("bytes held %d, pages owned %d", s.BytesHeld, pages)
	}
	if s.Fragments != done+s.Drops.Total()+held {
		t.Fatalf("fragments %d != reassembled %d + dropped %d + held %d (%v)", s.Fragments, done, s.Drops.Total(), held, s.Drops.List())
	}
}

// TestBooksUnderAttack: fragments of many datagrams (both families, some
// sources, random offsets, lengths, duplicates, overlaps, tiny ones, the
// clock jumping) against a small table and the least arena, so that
// table_full and memory_full evict: after every fragment, the counters
// add up and no page is lost or shared.
func TestBooksUnderAttack(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	srcs := []netip.Addr{src4, netip.MustParseAddr("198.18.0.9"), src6, netip.MustParseAddr("2001:db8::9")}
	for _, cfg := range []Config{{MaxDatagrams: 4, MaxBytes: 1, MinFirst: 8}, {MaxDatagrams: 64, MaxBytes: 1}, {}} {
		r := New(cfg)
		var done uint64
		now := int64(0)
		// Each datagram is cut in fragments of its own size; a fragment
		// is picked at random (duplicates come by themselves), and one in
		// eight is bent (moved by 8 bytes, cut short, grown, its M
		// flipped).
		type plan struct{ size, frag int }
		type pkey struct {
			v6  bool
			id  uint32
			src netip.Addr
		}
		plans := map[pkey]plan{}
		for range 20000 {
			v6 := rng.IntN(2) == 1
			src := srcs[rng.IntN(2)+2*map[bool]int{false: 0, true: 1}[v6]]
			k := pkey{v6, uint32(rng.IntN(12)), src}
			p, ok := plans[k]
			if !ok || rng.IntN(200) == 0 {
				p = plan{size: 16 + rng.IntN(9000), frag: 8 * (1 + rng.IntN(400))}
				plans[k] = p
			}
			i := rng.IntN((p.size + p.frag - 1) / p.frag)
			f := frag{v6: k.v6, id: k.id, src: k.src, off: i * p.frag}
			end := min(f.off+p.frag, p.size)
			f.more = end < p.size
			if rng.IntN(8) == 0 {
				switch rng.IntN(4) {
				case 0:
					f.off = max(0, f.off+8*(rng.IntN(3)-1))
				case 1:
					end = f.off + rng.IntN(end-f.off+1)
				case 2:
					end += 8 * rng.IntN(4)
				case 3:
					f.more = !f.more
				}
			}
			f.data = make([]byte, max(0, end-f.off))
			if rng.IntN(64) == 0 {
				now += int64(rng.IntN(90)) * int64(time.Second)
			}
			if d, ok := r.Add(f.build(), now); ok {
				done += uint64(d.Fragments)
				if rng.IntN(4) == 0 { // the caller refuses it
					r.Discard(d, DropUDPChecksum)
					done -= uint64(d.Fragments)
				}
			}
			if rng.IntN(100) == 0 {
				r.Expire(now)
			}
			checkBooks(t, r, done)
		}
		if s := r.Stats(); s.Reassembled == 0 || s.Drops[DropOverlap] == 0 {
			t.Errorf("config %+v: stats %+v: the test reached no completion or no overlap", cfg, s)
		}
	}
}

// TestFlood: a flood of first fragments with distinct identifications
// (datagrams that never complete, as an attacker's) keeps the table and
// the arena within their bounds, and a datagram whose fragments come
// together in the midst of it still completes.
func TestFlood(t *testing.T) {
	families(t, func(t *testing.T, v6 bool) {
		r := New(Config{MinFirst: 8})
		data := payload(2400, 3)
		good := split(v6, 1<<16-1, data, 1232)
		junk := payload(1480, 4)
		var done uint64
		for i := range 50000 {
			// 12 fragments a datagram, a page each: 256 datagrams
			// would need one and a half arenas.
			f := frag{v6: v6, id: uint32(i / 12 % (1<<16 - 1)), off: i % 12 * PageSize, more: true, data: junk}
			if _, ok := r.Add(f.build(), int64(i)); ok {
				t.Fatal("a flood fragment completed a datagram")
			}
			if i%997 == 0 {
				got := feed(r, int64(i), good...)
				if len(got) != 1 || !bytes.Equal(got[0].Data, data) {
					t.Fatalf("after %d flood fragments the datagram did not complete", i)
				}
				done += uint64(len(good))
			}
			if s := r.Stats(); s.InProgress > DefaultMaxDatagrams || s.BytesHeld > DefaultMaxBytes {
				t.Fatalf("after %d flood fragments: %+v", i, s)
			}
		}
		checkBooks(t, r, done)
		if s := r.Stats(); s.Drops[DropMemoryFull] == 0 {
			t.Errorf("drops %v, want memory_full", s.Drops.List())
		}
	})
}

// checkIndex checks the Reassembler's index of its used slots: each is
// found through its key's bucket, is once in the start order (which links
// back as it links forward), and the free slots are the others.
func checkIndex(t *testing.T, r *Reassembler, used int) {
	t.Helper()
	seen := make([]int, len(r.keys))
	for i := range r.keys {
		if !r.keys[i].used {
			continue
		}
		h := r.keyHash(&r.keys[i])
		if r.hash[i] != h {
			t.Fatalf("slot %d: hash %x, key's %x", i, r.hash[i], h)
		}
		if r.find(&r.keys[i], h, r.slots[i].created) != i {
			t.Fatalf("slot %d not found by its key", i)
		}
	}
	n, prev := 0, int32(-1)
	for i := r.first; i >= 0; i = r.newer[i] {
		if !r.keys[i].used || seen[i] != 0 || r.older[i] != prev {
			t.Fatalf("start order broken at slot %d (used %v, seen %d, older %d want %d)", i, r.keys[i].used, seen[i], r.older[i], prev)
		}
		seen[i]++
		prev = i
		n++
	}
	if n != used || r.last != prev {
		t.Fatalf("start order: %d slots (last %d), %d in use (last %d)", n, prev, used, r.last)
	}
	for _, i := range r.freeSlots {
		if r.keys[i].used || seen[i] != 0 {
			t.Fatalf("free slot %d in use or listed twice", i)
		}
		seen[i]--
	}
	if len(r.freeSlots)+used != len(r.keys) {
		t.Fatalf("%d free slots and %d in use of %d", len(r.freeSlots), used, len(r.keys))
	}
}
