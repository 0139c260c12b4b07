package chachapoly

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// shapeLens are message lengths at the edges the SIMD paths split on:
// Poly1305's 16-byte blocks, ChaCha20's 64-byte blocks, and the size
// classes (powers of 2 of the block count, of the message alone and with
// the key block in front as sealing has it), up to 2048 bytes.
var shapeLens = []int{0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 128, 129,
	191, 192, 193, 255, 256, 257, 447, 448, 449, 495, 496, 511, 512, 513, 959, 960, 961,
	1023, 1024, 1025, 1420, 1983, 1984, 1985, 2047, 2048}

// shapeSizes are burst sizes around the lane counts (8, 16) and the chunk
// (64 packets).
var shapeSizes = []int{1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 129}

// lenPattern gives packet i's message length in a burst of n.
type lenPattern struct {
	name string
	f    func(i, n int, rng *rand.Rand) int
}

// shapePatterns are the length mixes: one length for all; two lengths in
// turn that straddle a size class; one length but one packet (first,
// middle or last) of another; lengths drawn from shapeLens.
func shapePatterns() []lenPattern {
	var ps []lenPattern
	for _, l := range shapeLens {
		ps = append(ps, lenPattern{fmt.Sprint("all", l), func(int, int, *rand.Rand) int { return l }})
	}
	for _, ab := range [][2]int{{0, 1}, {15, 16}, {16, 17}, {31, 33}, {48, 49}, {63, 64}, {64, 65}, {127, 128},
		{128, 129}, {191, 192}, {192, 193}, {447, 449}, {448, 449}, {495, 496}, {511, 513}, {960, 961},
		{1023, 1025}, {1984, 1985}, {0, 2048}, {1420, 0}, {2048, 1}} {
		a, b := ab[0], ab[1]
		ps = append(ps, lenPattern{fmt.Sprint("alt", a, "/", b), func(i, _ int, _ *rand.Rand) int {
			if i%2 == 0 {
				return a
			}
			return b
		}})
		for _, where := range []string{"first", "middle", "last"} {
			ps = append(ps, lenPattern{fmt.Sprint(a, "but-", where, "-", b), func(i, n int, _ *rand.Rand) int {
				if at := map[string]int{"first": 0, "middle": n / 2, "last": n - 1}[where]; i == at {
					return b
				}
				return a
			}})
		}
	}
	ps = append(ps, lenPattern{"random", func(_, _ int, rng *rand.Rand) int { return shapeLens[rng.IntN(len(shapeLens))] }})
	return ps
}

// keyPattern gives packet i's key index (into 64 keys) in a burst of n.
type keyPattern struct {
	name string
	f    func(i, n int) int
}

var shapeKeys = []keyPattern{
	{"one", func(int, int) int { return 0 }},
	{"each", func(i, _ int) int { return i % 64 }},       // 64 distinct keys, lane by lane
	{"two", func(i, _ int) int { return i % 2 }},         // changing every lane
	{"runs3", func(i, _ int) int { return (i / 3) % 5 }}, // runs across pass boundaries
	{"one-but-middle", func(i, n int) int {
		if i == n/2 {
			return 1
		}
		return 0
	}},
}

// TestBurstShapes seals and opens, with every implementation forced in
// turn (as forEachImpl), bursts of the sizes of shapeSizes with the length mixes of
// shapePatterns and the key mixes of shapeKeys (up to 64 distinct keys),
// and compares with x/crypto; for some, it then opens the burst once per
// packet position with that packet's tag corrupted: that packet alone
// fails, zeroed, and every other one opens.
func TestBurstShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	var refs []*ref
	for range 64 {
		refs = append(refs, newRef(t, rng))
	}
	oldIm, oldPoly8 := active, poly8Always
	t.Cleanup(func() { active, poly8Always = oldIm, oldPoly8 })
	for _, n := range shapeSizes {
		for pi, lp := range shapePatterns() {
			for ki, kp := range shapeKeys {
				// Every length mix with one key and with many; the
				// other key mixes on a third of the length mixes.
				if ki > 1 && (pi+ki)%3 != 0 {
					continue
				}
				lens := make([]int, n)
				keys := make([]*ref, n)
				for i := range lens {
					lens[i] = lp.f(i, n, rng)
					keys[i] = refs[kp.f(i, n)]
				}
				pkts, plain, want := burstKeys(t, rng, lens, keys)
				positions := []int{0, n / 2, n - 1}
				if (pi+ki+n)%7 == 0 {
					positions = positions[:0]
					for p := range n {
						positions = append(positions, p)
					}
				}
				for _, v := range variants() {
					active, poly8Always = v.im, v.poly8
					name := fmt.Sprintf("%v: %d packets, lengths %s, keys %s", v, n, lp.name, kp.name)
					for i := range pkts {
						copy(pkts[i].Data, plain[i])
					}
					Seal(pkts)
					for i := range pkts {
						if !bytes.Equal(pkts[i].Data, want[i]) {
							t.Fatalf("%s: Seal packet %d (len %d) differs from x/crypto", name, i, lens[i])
						}
					}
					ok := make([]bool, n)
					for _, bad := range positions {
						for i := range pkts {
							copy(pkts[i].Data, want[i])
						}
						d := pkts[bad].Data
						d[len(d)-TagSize+rng.IntN(TagSize)] ^= 1 << rng.IntN(8)
						if got := Open(pkts, ok); got != 1 {
							t.Fatalf("%s: tag of packet %d corrupted: Open failed %d packets, want 1", name, bad, got)
						}
						for i := range pkts {
							m := len(pkts[i].Data) - TagSize
							switch {
							case i == bad && (ok[i] || !bytes.Equal(pkts[i].Data[:m], make([]byte, m))):
								t.Fatalf("%s: corrupted packet %d: ok %v, not zeroed", name, i, ok[i])
							case i != bad && (!ok[i] || !bytes.Equal(pkts[i].Data[:m], plain[i])):
								t.Fatalf("%s: packet %d (corrupted %d): ok %v, plaintext differs", name, i, bad, ok[i])
							}
						}
					}
				}
			}
		}
	}
}

// burstKeys is burst with packet i's key keys[i] and no additional data.
func burstKeys(t testing.TB, rng *rand.Rand, lens []int, keys []*ref) (pkts []Packet, plain, want [][]byte) {
	for i, n := range lens {
		p, pl, w := burst(t, rng, []int{n}, keys[i:i+1], 0)
		pkts, plain, want = append(pkts, p...), append(plain, pl...), append(want, w...)
	}
	return pkts, plain, want
}

// FuzzBurstShapes is FuzzBurst with the burst's shape chosen packet by
// packet by the input, which FuzzBurst's one seed and uniform lengths
// cannot aim at: two bytes a packet (up to 130 packets), the first its
// length, the second its key (one of 64) and, in bit 6, a corrupted tag
// for that packet's Open (the first such packet only). Length byte b:
// b < 2·len(shapeLens) is shapeLens[b/2] (+16 if b is odd, capped at
// 2048); otherwise 8·(b - 2·len(shapeLens)).
func FuzzBurstShapes(f *testing.F) {
	f.Add(uint64(1), []byte{0, 0, 0, 1, 0, 2})
	f.Add(uint64(2), bytes.Repeat([]byte{24, 0}, 17))
	f.Add(uint64(3), bytes.Repeat([]byte{26, 0, 28, 1}, 33))
	f.Add(uint64(4), append(bytes.Repeat([]byte{84, 5}, 15), 2, 0x45))
	rng0 := rand.New(rand.NewPCG(23, 23))
	var refs []*ref
	for range 64 {
		refs = append(refs, newRef(f, rng0))
	}
	f.Fuzz(func(t *testing.T, seed uint64, shape []byte) {
		// The implementation forced below is put back however the
		// input ends (a t.Fatalf included).
		defer func() { active, poly8Always = detect(), false }()
		n := min(len(shape)/2, 130)
		if n == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		lens := make([]int, n)
		keys := make([]*ref, n)
		bad := -1
		for i := range n {
			b, k := int(shape[2*i]), shape[2*i+1]
			if b < 2*len(shapeLens) {
				lens[i] = min(shapeLens[b/2]+16*(b%2), 2048)
			} else {
				lens[i] = 8 * (b - 2*len(shapeLens))
			}
			keys[i] = refs[k&63]
			if k&0x40 != 0 && bad < 0 {
				bad = i
			}
		}
		for _, v := range variants() {
			active, poly8Always = v.im, v.poly8
			pkts, plain, want := burstKeys(t, rng, lens, keys)
			Seal(pkts)
			for i := range pkts {
				if !bytes.Equal(pkts[i].Data, want[i]) {
					t.Fatalf("%v: Seal packet %d (len %d) differs from x/crypto", v, i, lens[i])
				}
			}
			if bad >= 0 {
				d := pkts[bad].Data
				d[len(d)-TagSize+rng.IntN(TagSize)] ^= 1 << rng.IntN(8)
			}
			ok := make([]bool, n)
			wantFailed := 0
			if bad >= 0 {
				wantFailed = 1
			}
			if got := Open(pkts, ok); got != wantFailed {
				t.Fatalf("%v: Open failed %d packets, want %d", v, got, wantFailed)
			}
			for i := range pkts {
				m := len(pkts[i].Data) - TagSize
				switch {
				case i == bad && (ok[i] || !bytes.Equal(pkts[i].Data[:m], make([]byte, m))):
					t.Fatalf("%v: corrupted packet %d: ok %v, not zeroed", v, i, ok[i])
				case i != bad && (!ok[i] || !bytes.Equal(pkts[i].Data[:m], plain[i])):
					t.Fatalf("%v: packet %d: ok %v, plaintext differs", v, i, ok[i])
				}
			}
		}
	})
}
