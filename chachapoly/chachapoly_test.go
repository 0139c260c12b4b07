package chachapoly

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// setImpl forces implementation im for the rest of the test.
func setImpl(t testing.TB, im impl) {
	old := active
	active = im
	t.Cleanup(func() { active = old })
}

// forEachImpl runs f once per implementation this CPU supports, forced,
// and once more for each implementation that has the AVX2 Poly1305 kernel
// with that kernel forced on every group (poly8Always).
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, im := range supported() {
		t.Run(im.String(), func(t *testing.T) {
			setImpl(t, im)
			f(t)
		})
		if hasPoly8(im) {
			t.Run(im.String()+"-poly8", func(t *testing.T) {
				setImpl(t, im)
				setPoly8Always(t)
				f(t)
			})
		}
	}
}

// hasPoly8 reports whether im can MAC with the AVX2 Poly1305 kernel.
func hasPoly8(im impl) bool { return im == implAVX2 || im == implAVX512 }

// setPoly8Always forces the AVX2 Poly1305 kernel on every group for the
// rest of the test.
func setPoly8Always(t testing.TB) {
	old := poly8Always
	poly8Always = true
	t.Cleanup(func() { poly8Always = old })
}

// variant is an implementation, with or without the AVX2 Poly1305 kernel
// forced.
type variant struct {
	im    impl
	poly8 bool
}

func (v variant) String() string {
	if v.poly8 {
		return v.im.String() + "-poly8"
	}
	return v.im.String()
}

// variants lists what forEachImpl runs, for loops that cannot use subtests.
func variants() []variant {
	var vs []variant
	for _, im := range supported() {
		vs = append(vs, variant{im: im})
		if hasPoly8(im) {
			vs = append(vs, variant{im: im, poly8: true})
		}
	}
	return vs
}

// ref is the reference: x/crypto's AEAD on the same packet.
type ref struct {
	key [KeySize]byte
	k   Key
	a   cipher.AEAD
}

func newRef(t testing.TB, rng *rand.Rand) *ref {
	r := &ref{}
	for i := range r.key {
		r.key[i] = byte(rng.Uint32())
	}
	r.k.Set(&r.key)
	a, err := chacha20poly1305.New(r.key[:])
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	return r
}

func nonceBytes(p *Packet) []byte {
	n := nonce(p)
	return n[:]
}

// burst makes packets of the given message lengths, each with a random
// counter and plaintext, keys taken in turn from refs, and AD of random
// length up to maxAD. It returns the packets, the plaintexts and the
// reference sealed outputs (ciphertext ‖ tag).
func burst(t testing.TB, rng *rand.Rand, lens []int, refs []*ref, maxAD int) (pkts []Packet, plain, want [][]byte) {
	for i, n := range lens {
		r := refs[i%len(refs)]
		msg := make([]byte, n)
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		var ad []byte
		if maxAD > 0 {
			ad = make([]byte, rng.IntN(maxAD+1))
			for j := range ad {
				ad[j] = byte(rng.Uint32())
			}
		}
		p := Packet{Key: &r.k, Counter: rng.Uint64(), AD: ad}
		if rng.IntN(4) == 0 {
			p.Counter = uint64(rng.IntN(5)) // small counters as WireGuard starts
		}
		p.Data = append(append([]byte(nil), msg...), make([]byte, TagSize)...)
		pkts = append(pkts, p)
		plain = append(plain, msg)
		want = append(want, r.a.Seal(nil, nonceBytes(&p), msg, ad))
	}
	return pkts, plain, want
}

// checkBurst seals pkts, compares with want, opens them again and compares
// with plain.
func checkBurst(t *testing.T, pkts []Packet, plain, want [][]byte) {
	t.Helper()
	Seal(pkts)
	for i := range pkts {
		if !bytes.Equal(pkts[i].Data, want[i]) {
			t.Fatalf("Seal: packet %d (len %d, ad %d): got %x, want %x", i, len(plain[i]), len(pkts[i].AD), pkts[i].Data, want[i])
		}
	}
	ok := make([]bool, len(pkts))
	if bad := Open(pkts, ok); bad != 0 {
		t.Fatalf("Open: %d packets failed, want 0 (ok %v)", bad, ok)
	}
	for i := range pkts {
		n := len(pkts[i].Data) - TagSize
		if !ok[i] || !bytes.Equal(pkts[i].Data[:n], plain[i]) {
			t.Fatalf("Open: packet %d (len %d): ok %v, got %x, want %x", i, n, ok[i], pkts[i].Data[:n], plain[i])
		}
	}
}

// TestMatchesXCrypto seals and opens every message length from 0 to 2048
// with each implementation, in bursts of 64 consecutive lengths, with one
// key per burst, three keys in turn, and one key per packet, with and
// without AD, and compares with x/crypto.
func TestMatchesXCrypto(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var refs []*ref
		for range 64 {
			refs = append(refs, newRef(t, rng))
		}
		for start := 0; start <= 2048; start += 64 {
			var lens []int
			for n := start; n < start+64 && n <= 2048; n++ {
				lens = append(lens, n)
			}
			for _, nk := range []int{1, 3, 64} {
				for _, maxAD := range []int{0, 40} {
					pkts, plain, want := burst(t, rng, lens, refs[:nk], maxAD)
					checkBurst(t, pkts, plain, want)
				}
			}
		}
	})
}

// TestUniformBursts seals and opens bursts whose packets all have one
// length (WireGuard's common case: the vector Poly1305 reads every lane's
// message in its fast steps, then only the lengths block), of sizes that
// leave lanes of the last group idle, and compares with x/crypto.
func TestUniformBursts(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		refs := []*ref{newRef(t, rng), newRef(t, rng)}
		for _, n := range []int{8, 9, 16, 24, 31, 64, 65} {
			for _, l := range []int{0, 16, 48, 64, 100, 1420, 2048} {
				lens := make([]int, n)
				for i := range lens {
					lens[i] = l
				}
				pkts, plain, want := burst(t, rng, lens, refs, 0)
				checkBurst(t, pkts, plain, want)
			}
		}
	})
}

// TestMixedBursts seals and opens bursts of random sizes (1 to 200 packets)
// mixing short and long messages and keys.
func TestMixedBursts(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		refs := []*ref{newRef(t, rng), newRef(t, rng), newRef(t, rng)}
		for range 60 {
			lens := make([]int, 1+rng.IntN(200))
			for i := range lens {
				lens[i] = mixedLen(rng)
			}
			pkts, plain, want := burst(t, rng, lens, refs, 16)
			checkBurst(t, pkts, plain, want)
		}
	})
}

// mixedLen is a message length of a mixed burst: short (under 80
// bytes), about a full WireGuard packet (1,420-1,439), or any up to 2,048,
// a third of the time each.
func mixedLen(rng *rand.Rand) int {
	switch rng.IntN(3) {
	case 0:
		return rng.IntN(80)
	case 1:
		return 1420 + rng.IntN(20)
	}
	return rng.IntN(2049)
}

// TestOpenRejectsOnlyTheBadPacket corrupts one byte (of the ciphertext or of
// the tag) of one packet of a burst: that packet fails with its plaintext
// area zeroed and its tag left as it was; every other packet opens to its
// plaintext.
func TestOpenRejectsOnlyTheBadPacket(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		refs := []*ref{newRef(t, rng), newRef(t, rng)}
		for trial := range 200 {
			lens := make([]int, 1+rng.IntN(40))
			for i := range lens {
				lens[i] = rng.IntN(300)
				if rng.IntN(5) == 0 {
					lens[i] = 1420
				}
			}
			pkts, plain, want := burst(t, rng, lens, refs, 8)
			for i := range pkts {
				copy(pkts[i].Data, want[i])
			}
			bad := rng.IntN(len(pkts))
			d := pkts[bad].Data
			pos := rng.IntN(len(d))
			d[pos] ^= 1 << rng.IntN(8)
			tag := append([]byte(nil), d[len(d)-TagSize:]...)
			ok := make([]bool, len(pkts))
			if n := Open(pkts, ok); n != 1 {
				t.Fatalf("trial %d: Open failed %d packets, want 1", trial, n)
			}
			for i := range pkts {
				n := len(pkts[i].Data) - TagSize
				if i == bad {
					if ok[i] {
						t.Fatalf("trial %d: corrupted packet %d (byte %d of %d) opened", trial, i, pos, len(d))
					}
					if !bytes.Equal(pkts[i].Data[:n], make([]byte, n)) {
						t.Fatalf("trial %d: failed packet %d not zeroed: %x", trial, i, pkts[i].Data[:n])
					}
					if !bytes.Equal(pkts[i].Data[n:], tag) {
						t.Fatalf("trial %d: failed packet %d: tag changed", trial, i)
					}
					continue
				}
				if !ok[i] || !bytes.Equal(pkts[i].Data[:n], plain[i]) {
					t.Fatalf("trial %d: packet %d: ok %v, got %x, want %x", trial, i, ok[i], pkts[i].Data[:n], plain[i])
				}
			}
		}
	})
}

type vector struct {
	TcID   int    `json:"tcId"`
	Key    string `json:"key"`
	IV     string `json:"iv"`
	AAD    string `json:"aad"`
	Msg    string `json:"msg"`
	CT     string `json:"ct"`
	Tag    string `json:"tag"`
	Result string `json:"result"`
}

// rfcVector is RFC 8439 Appendix A.5 (ChaCha20-Poly1305 decryption); its
// nonce has WireGuard's form (32 zero bits, then a 64-bit counter).
var rfcVector = vector{
	Key:    "1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0",
	IV:     "000000000102030405060708",
	AAD:    "f33388860000000000004e91",
	CT:     "64a0861575861af460f062c79be643bd5e805cfd345cf389f108670ac76c8cb24c6cfc18755d43eea09ee94e382d26b0bdb7b73c321b0100d4f03b7f355894cf332f830e710b97ce98c8a84abd0b948114ad176e008d33bd60f982b1ff37c8559797a06ef4f0ef61c186324e2b3506383606907b6a7c02b0f9f6157b53c867e4b9166c767b804d46a59b5216cde7a4e99040c5a40433225ee282a1b0a06c523eaf4534d7f83fa1155b0047718cbc546a0d072b04b3564eea1b422273f548271a0bb2316053fa76991955ebd63159434ecebb4e466dae5a1073a6727627097a1049e617d91d361094fa68f0ff77987130305beaba2eda04df997b714d6c6f2c29a6ad5cb4022b02709b",
	Tag:    "eead9d67890cbb22392336fea1851f38",
	Msg:    "496e7465726e65742d4472616674732061726520647261667420646f63756d656e74732076616c696420666f722061206d6178696d756d206f6620736978206d6f6e74687320616e64206d617920626520757064617465642c207265706c616365642c206f72206f62736f6c65746564206279206f7468657220646f63756d656e747320617420616e792074696d652e20497420697320696e617070726f70726961746520746f2075736520496e7465726e65742d447261667473206173207265666572656e6365206d6174657269616c206f7220746f2063697465207468656d206f74686572207468616e206173202fe2809c776f726b20696e2070726f67726573732e2fe2809d",
	Result: "valid",
}

func loadVectors(t *testing.T) []vector {
	b, err := os.ReadFile("testdata/wycheproof_chacha20_poly1305.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Tests []vector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Tests) == 0 {
		t.Fatal("no vectors")
	}
	return append(f.Tests, rfcVector)
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVectors runs RFC 8439 A.5 and the Wycheproof vectors through Seal and
// Open, all vectors in one burst (so lanes hold different keys), then opens
// them again with one tag bit flipped in each packet.
func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	forEachImpl(t, func(t *testing.T) {
		keys := make([]Key, len(vs))
		pkts := make([]Packet, len(vs))
		var want, msgs [][]byte
		for i, v := range vs {
			keys[i].Set((*[KeySize]byte)(unhex(t, v.Key)))
			iv := unhex(t, v.IV)
			msg := unhex(t, v.Msg)
			pkts[i] = Packet{
				Key:     &keys[i],
				Counter: binary.LittleEndian.Uint64(iv[4:]),
				nonce0:  binary.LittleEndian.Uint32(iv),
				AD:      unhex(t, v.AAD),
				Data:    append(append([]byte(nil), msg...), make([]byte, TagSize)...),
			}
			msgs = append(msgs, msg)
			want = append(want, append(unhex(t, v.CT), unhex(t, v.Tag)...))
		}
		checkBurst(t, pkts, msgs, want)
		for i := range pkts {
			copy(pkts[i].Data, want[i])
			pkts[i].Data[len(want[i])-1] ^= 0x80
		}
		ok := make([]bool, len(pkts))
		if n := Open(pkts, ok); n != len(pkts) {
			t.Errorf("Open with flipped tags: %d failed, want %d", n, len(pkts))
		}
	})
}

// TestNoAllocs checks that Seal and Open allocate nothing. The fallback
// allocates exactly what x/crypto itself does per call (nothing on amd64; its
// portable code, as with -tags purego, allocates), no more.
func TestNoAllocs(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		refs := []*ref{newRef(t, rng), newRef(t, rng)}
		lens := make([]int, 64)
		for i := range lens {
			lens[i] = 64 + 20*i
		}
		pkts, _, _ := burst(t, rng, lens, refs, 0)
		ok := make([]bool, len(pkts))
		want := 0.0
		if active == implGeneric {
			n := make([]byte, 12)
			want = testing.AllocsPerRun(20, func() {
				for i := range pkts {
					p := &pkts[i]
					m := len(p.Data) - TagSize
					refs[i%2].a.Seal(p.Data[:0], n, p.Data[:m], nil)
				}
				for i := range pkts {
					refs[i%2].a.Open(pkts[i].Data[:0], n, pkts[i].Data, nil)
				}
			})
		}
		if n := testing.AllocsPerRun(20, func() {
			Seal(pkts)
			Open(pkts, ok)
		}); n != want {
			t.Errorf("Seal+Open of 64 packets: %v allocations, want %v", n, want)
		}
	})
}

func TestKeyZero(t *testing.T) {
	var k Key
	key := [KeySize]byte{1, 2, 3}
	k.Set(&key)
	if k.IsZero() {
		t.Error("IsZero reports a set key as zero")
	}
	k.Zero()
	if k != (Key{}) {
		t.Errorf("after Zero, Key = %+v, want zero", k)
	}
	if !k.IsZero() {
		t.Error("IsZero reports an erased key as set")
	}
	// A key whose only nonzero byte is the last one is not zero.
	key = [KeySize]byte{KeySize - 1: 0x80}
	k.Set(&key)
	if k.IsZero() {
		t.Error("IsZero misses the last key byte")
	}
}

// TestPolyVectors checks the scalar Poly1305 against RFC 8439 §2.5.2.
func TestPolyVectors(t *testing.T) {
	key := (*[32]byte)(unhex(t, "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b"))
	msg := []byte("Cryptographic Forum Research Group")
	var p poly
	p.init(key)
	p.write(msg[:32])
	var last [16]byte
	copy(last[:], msg[32:])
	last[2] = 1 // the 2^(8·len) bit of a short final block
	p.h0, p.h1, p.h2 = blockNoHibit(&p, last)
	var tag [16]byte
	p.sum(&tag)
	if got, want := hex.EncodeToString(tag[:]), "a8061dc1305136c6c22b8baf0c0127a9"; got != want {
		t.Errorf("Poly1305 = %s, want %s", got, want)
	}
}

// blockNoHibit absorbs a final block whose padding bit is already in m, by
// absorbing it as a full block and taking the 2^128 bit back out first.
func blockNoHibit(p *poly, m [16]byte) (h0, h1, h2 uint64) {
	q := *p
	q.h2-- // block adds 2^128; cancel it (h2 >= 1 is not needed: wraps back)
	q.block(binary.LittleEndian.Uint64(m[:]), binary.LittleEndian.Uint64(m[8:]))
	return q.h0, q.h1, q.h2
}

// TestCPUPaths says which implementations the tests of this package force
// on this CPU and which it cannot run (their kernels are then untested
// here: a CPU without AVX-512 leaves out avx512 and avx512ifma). .ci/run
// prints the line, so a CI run on such a machine says what it did not
// test. It fails if the implementation this CPU would use is not among
// those tested.
func TestCPUPaths(t *testing.T) {
	run := supported()
	var missing []impl
	for im := implGeneric; im <= implAVX512IFMA; im++ {
		if !slices.Contains(run, im) {
			missing = append(missing, im)
		}
	}
	t.Logf("forced and tested on this CPU: %v; not runnable here, so untested: %v; in use: %v", run, missing, detect())
	if !slices.Contains(run, detect()) {
		t.Fatalf("the implementation in use, %v, is not among those tested (%v)", detect(), run)
	}
}

// TestOpenShortOK: Open with fewer results than packets panics before it
// opens any, even when ok's capacity would hold them all (it wrote the
// results past len(ok), where a caller ranging over ok never saw them).
func TestOpenShortOK(t *testing.T) {
	raw := [KeySize]byte{1}
	var k Key
	k.Set(&raw)
	defer k.Zero()
	pkts := make([]Packet, 4)
	for i := range pkts {
		pkts[i] = Packet{Key: &k, Counter: uint64(i), Data: make([]byte, 32+TagSize)}
	}
	Seal(pkts)
	sealed := bytes.Clone(pkts[0].Data)
	ok := make([]bool, 1, len(pkts))
	func() {
		defer func() {
			if r := recover(); r != "chachapoly: ok shorter than pkts" {
				t.Errorf("Open(4 packets, len(ok) 1) panicked with %v, want \"chachapoly: ok shorter than pkts\"", r)
			}
		}()
		Open(pkts, ok)
	}()
	if !bytes.Equal(pkts[0].Data, sealed) {
		t.Errorf("Open that panicked changed packet 0")
	}
}
