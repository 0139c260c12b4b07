package gateway

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// TestPrefixList cross-checks prefixList against the obvious slice (search,
// shift, append) over random adds, re-adds and removes, across the
// lengths where it makes and drops its index and compacts its holes.
func TestPrefixList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, universe := range []int{4, prefixListScan, 3 * prefixListScan, 1000} {
		var l prefixList
		var ref []netip.Prefix
		for op := range 20000 {
			pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(universe) >> 8), byte(r.IntN(universe)), 0}), 24)
			i := slices.Index(ref, pfx)
			switch r.IntN(3) {
			case 0, 1:
				if i >= 0 {
					ref = slices.Delete(ref, i, i+1)
				}
				ref = append(ref, pfx)
				l.Add(pfx)
			case 2:
				if i >= 0 {
					ref = slices.Delete(ref, i, i+1)
				}
				if got := l.Remove(pfx); got != (i >= 0) {
					t.Fatalf("universe %d op %d: Remove(%v) = %v, want %v", universe, op, pfx, got, i >= 0)
				}
			}
			if r.IntN(500) == 0 {
				ref = ref[:0]
				l.Reset()
			}
			if got := l.Append(nil); l.Len() != len(ref) || !slices.Equal(got, ref) {
				t.Fatalf("universe %d op %d: list = %v (Len %d), want %v", universe, op, got, l.Len(), ref)
			}
		}
	}
}

// BenchmarkReaddAllowedIPs applies, once per iteration, a set request that
// re-adds each of a peer's n allowed IPs (wg addconf of the same list
// again), then one that removes them all, then adds them again: linear in
// n (it was quadratic: 3.2 s to re-add 40,000).
func BenchmarkReaddAllowedIPs(b *testing.B) {
	for _, n := range []int{1000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d, err := New(Options{Dataplane: newFakeDP(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var k noise.PublicKey
			k[0] = 7
			var add, del strings.Builder
			add.WriteString("public_key=" + k.Hex() + "\n")
			del.WriteString("public_key=" + k.Hex() + "\n")
			for i := range n {
				fmt.Fprintf(&add, "allowed_ip=10.%d.%d.0/24\n", byte(i>>8), byte(i))
				fmt.Fprintf(&del, "allowed_ip=-10.%d.%d.0/24\n", byte(i>>8), byte(i))
			}
			if err := d.IpcSet(strings.NewReader(add.String())); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := d.IpcSet(strings.NewReader(add.String())); err != nil {
					b.Fatal(err)
				}
				if err := d.IpcSet(strings.NewReader(del.String())); err != nil {
					b.Fatal(err)
				}
				if err := d.IpcSet(strings.NewReader(add.String())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
