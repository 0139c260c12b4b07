package chachapoly

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// guarded maps n regions of one page each, every one between two pages
// that fault on any access, and unmaps them when the test ends.
func guarded(t *testing.T, n int) [][]byte {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (2*n+1)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	regions := make([][]byte, n)
	for i := 0; i <= n; i++ {
		if err := unix.Mprotect(mem[2*i*page:(2*i+1)*page], unix.PROT_NONE); err != nil {
			t.Fatalf("mprotect: %v", err)
		}
		if i < n {
			regions[i] = mem[(2*i+1)*page : (2*i+2)*page : (2*i+2)*page]
		}
	}
	return regions
}

// TestNoAccessOutsideData seals and opens bursts whose packets each lie
// against a page that faults on any access: every packet's Data ends at
// the page's end (a read or write past it crashes the test), or begins at
// its start (one before it does), for each implementation, with lengths
// from 0 to 2,048 bytes mixed in one burst, some packets with additional
// data (idle SIMD lanes), and as many keys as packets. The kernels' loads
// of 16- and 64-byte blocks, and the lanes an idle lane borrows, must stay
// inside the messages; the results must still be x/crypto's.
func TestNoAccessOutsideData(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		const n = 40
		regions := guarded(t, n)
		for round := range 24 {
			lens := make([]int, 1+rng.IntN(n))
			for i := range lens {
				lens[i] = mixedLen(rng)
			}
			refs := make([]*ref, len(lens))
			for i := range refs {
				refs[i] = newRef(t, rng)
			}
			maxAD := 0
			if round%3 == 2 {
				maxAD = 8
			}
			pkts, plain, want := burst(t, rng, lens, refs, maxAD)
			atEnd := round%2 == 0
			for i := range pkts {
				d, r := pkts[i].Data, regions[i]
				if atEnd {
					pkts[i].Data = r[len(r)-len(d):]
				} else {
					pkts[i].Data = r[:len(d):len(d)]
				}
				copy(pkts[i].Data, d)
			}
			Seal(pkts)
			for i := range pkts {
				if !bytes.Equal(pkts[i].Data, want[i]) {
					t.Fatalf("round %d: Seal: packet %d (len %d): not x/crypto's", round, i, lens[i])
				}
			}
			ok := make([]bool, len(pkts))
			if bad := Open(pkts, ok); bad != 0 {
				t.Fatalf("round %d: Open: %d packets failed, want 0", round, bad)
			}
			for i := range pkts {
				if m := pkts[i].Data[:lens[i]]; !bytes.Equal(m, plain[i]) {
					t.Fatalf("round %d: Open: packet %d (len %d): not the plaintext", round, i, lens[i])
				}
			}
		}
	})
}
