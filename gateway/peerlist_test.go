package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// TestPeerList cross-checks peerList against the obvious slice (append,
// search and shift) over random adds and removes, across compactions and
// resets, and checks that every peer knows its position.
func TestPeerList(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, universe := range []int{3, 50, 3000} {
		pool := make([]*peer, universe)
		for i := range pool {
			pool[i] = &peer{listIdx: -1}
		}
		var l peerList
		var ref []*peer
		for op := range 30000 {
			p := pool[r.IntN(universe)]
			i := slices.Index(ref, p)
			switch {
			case i < 0:
				ref = append(ref, p)
				l.Add(p)
			default:
				ref = slices.Delete(ref, i, i+1)
				l.Remove(p)
				if p.listIdx != -1 {
					t.Fatalf("universe %d op %d: a removed peer's listIdx = %d, want -1", universe, op, p.listIdx)
				}
			}
			if r.IntN(2000) == 0 {
				ref = ref[:0]
				l.Reset()
			}
			if got := l.Append(nil); l.Len() != len(ref) || !slices.Equal(got, ref) {
				t.Fatalf("universe %d op %d: list has %d peers (Len %d), want %d in order", universe, op, len(got), l.Len(), len(ref))
			}
			for j, q := range l.items {
				if q != nil && q.listIdx != j {
					t.Fatalf("universe %d op %d: peer at %d has listIdx %d", universe, op, j, q.listIdx)
				}
			}
		}
	}
}

// TestPeerListGivesMemoryBack: once most of a large configuration's peers
// are removed one by one, the list's array shrinks with them.
func TestPeerListGivesMemoryBack(t *testing.T) {
	var l peerList
	ps := make([]*peer, 100000)
	for i := range ps {
		ps[i] = &peer{}
		l.Add(ps[i])
	}
	for _, p := range ps[:len(ps)-10] {
		l.Remove(p)
	}
	if l.Len() != 10 || cap(l.items) > 2*peerListKeep {
		t.Errorf("after removing all but 10 of %d peers: Len %d, capacity %d, want 10 and at most %d", len(ps), l.Len(), cap(l.items), 2*peerListKeep)
	}
}

// BenchmarkRemovePeers times a set request that removes the later half of
// n configured peers, newest first (as wg syncconf drops the peers missing
// from an edited file); each iteration then adds them again, untimed.
// Linear in n (removing searched and shifted the peer slice: quadratic).
func BenchmarkRemovePeers(b *testing.B) {
	for _, n := range []int{1000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d, err := New(Options{Dataplane: newFakeDP(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var add, del strings.Builder
			for i := range n {
				var k noise.PublicKey
				k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 7
				fmt.Fprintf(&add, "public_key=%s\nallowed_ip=10.%d.%d.%d/32\n", k.Hex(), byte(i>>16), byte(i>>8), byte(i))
			}
			for i := n - 1; i >= n/2; i-- {
				var k noise.PublicKey
				k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 7
				fmt.Fprintf(&del, "public_key=%s\nremove=true\n", k.Hex())
			}
			if err := d.IpcSet(strings.NewReader(add.String())); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := d.IpcSet(strings.NewReader(del.String())); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := d.IpcSet(strings.NewReader(add.String())); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
