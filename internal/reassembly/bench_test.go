package reassembly

import "testing"

// BenchmarkAdd is the cost of a fragment: a peer's datagrams of 1,500
// bytes in two fragments each (64 in turn), and a flood of fragments of
// datagrams that never complete, each a new one, with the table full (every
// fragment scans the keys, evicts the oldest datagram and takes its slot).
// The workers share the Reassembler under one lock: its cost per fragment
// bounds the fragments per second of all of them together.
func BenchmarkAdd(b *testing.B) {
	for _, bc := range []struct {
		name  string
		pkts  func() [][]byte
		flood bool
	}{
		{"peer", func() (p [][]byte) {
			for id := range uint32(64) {
				for _, f := range split(false, id, payload(1500, 1), 1232) {
					p = append(p, f.build())
				}
			}
			return p
		}, false},
		{"flood", func() (p [][]byte) {
			for id := range uint32(4096) {
				p = append(p, frag{id: id, off: 1480, more: true, data: payload(8, 1)}.build())
			}
			return p
		}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := New(Config{MinFirst: 8})
			pkts := bc.pkts()
			i := 0
			for b.Loop() {
				r.Add(pkts[i%len(pkts)], int64(i))
				i++
			}
			if s := r.Stats(); bc.flood && i > DefaultMaxDatagrams && s.Drops[DropTableFull] == 0 {
				b.Errorf("flood: drops %v, want table_full", s.Drops.List())
			}
		})
	}
}
