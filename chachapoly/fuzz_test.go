package chachapoly

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// FuzzBurst is a differential fuzz target: the input seeds a burst (number
// of packets, their lengths, keys, counters, AD, and one packet to corrupt)
// that every implementation seals and opens; the sealed bytes must equal
// x/crypto's, every intact packet must open to its plaintext, and the
// corrupted one (one flipped bit anywhere in ciphertext or tag) must fail
// alone, zeroed.
func FuzzBurst(f *testing.F) {
	f.Add(uint64(0), uint8(1), uint16(64), uint8(0))      // one small packet
	f.Add(uint64(1), uint8(64), uint16(1420), uint8(3))   // a full burst, mixed
	f.Add(uint64(2), uint8(17), uint16(0), uint8(1))      // empty messages, 17 lanes
	f.Add(uint64(3), uint8(33), uint16(2048), uint8(200)) // long, many keys
	f.Fuzz(func(t *testing.T, seed uint64, npkts uint8, maxLen uint16, flags uint8) {
		// The implementation forced below is put back however the
		// input ends (a t.Fatalf included).
		defer func() { active, poly8Always = detect(), false }()
		n := 1 + int(npkts)%80
		ml := int(maxLen) % 2049
		rng := rand.New(rand.NewPCG(seed, uint64(flags)))
		nkeys := 1 + int(flags)%5
		var refs []*ref
		for range nkeys {
			refs = append(refs, newRef(t, rng))
		}
		lens := make([]int, n)
		for i := range lens {
			lens[i] = rng.IntN(ml + 1)
		}
		maxAD := 0
		if flags&0x80 != 0 {
			maxAD = 24
		}
		for _, v := range variants() {
			im := v
			active, poly8Always = v.im, v.poly8
			pkts, plain, want := burst(t, rng, lens, refs, maxAD)
			Seal(pkts)
			for i := range pkts {
				if !bytes.Equal(pkts[i].Data, want[i]) {
					t.Fatalf("%v: Seal packet %d (len %d) differs from x/crypto", im, i, lens[i])
				}
			}
			bad := rng.IntN(n)
			d := pkts[bad].Data
			bit := rng.IntN(8 * len(d))
			d[bit/8] ^= 1 << (bit % 8)
			ok := make([]bool, n)
			if got := Open(pkts, ok); got != 1 {
				t.Fatalf("%v: Open failed %d packets, want 1", im, got)
			}
			for i := range pkts {
				m := len(pkts[i].Data) - TagSize
				switch {
				case i == bad && (ok[i] || !bytes.Equal(pkts[i].Data[:m], make([]byte, m))):
					t.Fatalf("%v: corrupted packet %d: ok %v, not zeroed", im, i, ok[i])
				case i != bad && (!ok[i] || !bytes.Equal(pkts[i].Data[:m], plain[i])):
					t.Fatalf("%v: packet %d: ok %v, plaintext differs", im, i, ok[i])
				}
			}
		}
	})
}

// TestConcurrent runs Seal and Open on several goroutines sharing keys, for
// the race detector.
func TestConcurrent(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		refs := []*ref{newRef(t, rng), newRef(t, rng)}
		done := make(chan error)
		for w := range 4 {
			lens := make([]int, 40)
			for i := range lens {
				lens[i] = (w*97 + i*31) % 1500
			}
			pkts, plain, want := burst(t, rng, lens, refs, 0)
			go func() {
				var err error
				for range 20 {
					for i := range pkts {
						copy(pkts[i].Data, plain[i])
					}
					Seal(pkts)
					for i := range pkts {
						if !bytes.Equal(pkts[i].Data, want[i]) {
							err = errMismatch
						}
					}
					ok := make([]bool, len(pkts))
					if Open(pkts, ok) != 0 {
						err = errMismatch
					}
				}
				done <- err
			}()
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
}

var errMismatch = binaryErr("concurrent Seal/Open gave a wrong result")

type binaryErr string

func (e binaryErr) Error() string { return string(e) }

var _ = binary.LittleEndian
