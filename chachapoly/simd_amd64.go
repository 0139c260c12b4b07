//go:build !purego

package chachapoly

import (
	"crypto/subtle"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// lanes is the number of messages one AVX-512 ChaCha20 pass handles: one
// per 32-bit lane of a 512-bit register.
const lanes = 16

// group is the state of 16 lanes handed to the assembly. Its layout is
// fixed (the generator in _asm hard-codes the offsets; TestGroupLayout
// checks them). It lives on the caller's stack and is wiped before the
// burst call returns.
type group struct {
	key     [8][lanes]uint32      // key words, word-major: key[w][l] is word w of lane l
	nonce   [3][lanes]uint32      // nonce words 13..15 of the state, word-major
	ptr     [lanes]unsafe.Pointer // start of each lane's message (nil if idle)
	n       [lanes]int            // bytes of each lane's message (0 if idle)
	polyKey [lanes][32]byte       // one-time Poly1305 key of each lane (block 0)
}

// chacha16 is in chacha_amd64.s.
//
//go:noescape
func chacha16(lanes *group, j0, j1 uint64)

// chacha8 is in chacha_amd64.s.
//
//go:noescape
func chacha8(lanes *group, j0, j1 uint64)

// CPU features, read once (x/sys/cpu checks that the OS saves the
// registers too).
var (
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2
	hasIFMA   = hasAVX512 && cpu.X86.HasAVX512IFMA
)

// detect picks the fastest implementation the CPU runs.
func detect() impl {
	switch {
	case hasIFMA:
		return implAVX512IFMA
	case hasAVX512:
		return implAVX512
	case hasAVX2:
		return implAVX2
	}
	return implGeneric
}

// supported lists the implementations this CPU can run, for tests.
func supported() []impl {
	s := []impl{implGeneric}
	if hasAVX2 {
		s = append(s, implAVX2)
	}
	if hasAVX512 {
		s = append(s, implAVX512)
	}
	if hasIFMA {
		s = append(s, implAVX512IFMA)
	}
	return s
}

// width is the number of lanes of one ChaCha20 pass of im.
func width(im impl) int {
	if im == implAVX2 {
		return 8
	}
	return lanes
}

// chacha runs blocks j0..j1-1 of g's lanes with im's kernel.
func chacha(im impl, g *group, j0, j1 uint64) {
	if im == implAVX2 {
		chacha8(g, j0, j1)
		return
	}
	chacha16(g, j0, j1)
}

// maxChunk is how many packets are ordered by length at once.
const maxChunk = 64

// order fills idx with the indexes of pkts (len(pkts) <= maxChunk) grouped by
// size class (the bit length of the message's block count), so that a group
// of 16 lanes holds messages of similar length and few lanes idle while the
// longest finishes. It is a counting sort: linear, no comparison of data.
func order(pkts []Packet, idx []uint8) {
	const classes = 16
	var count [classes + 1]uint8
	var class [maxChunk]uint8
	for i := range pkts {
		c := sizeClass(len(pkts[i].Data) - TagSize)
		class[i] = c
		count[c+1]++
	}
	for c := 1; c <= classes; c++ {
		count[c] += count[c-1]
	}
	for i := range pkts {
		c := class[i]
		idx[count[c]] = uint8(i)
		count[c]++
	}
}

func sizeClass(n int) uint8 {
	b := uint((n + 63) / 64)
	c := uint8(0)
	for b > 0 && c < 15 {
		b >>= 1
		c++
	}
	return c
}

// load puts the packets pkts[idx[l]] in lanes l of g, idles the other lanes,
// and returns the ChaCha20 block count of the longest message.
func (g *group) load(pkts []Packet, idx []uint8) (blocks uint64) {
	maxLen := 0
	for l := 0; l < lanes; l++ {
		if l >= len(idx) {
			g.ptr[l], g.n[l] = nil, 0
			continue
		}
		p := &pkts[idx[l]]
		k := &p.Key.w
		for w := range k {
			g.key[w][l] = k[w]
		}
		g.nonce[0][l] = p.nonce0
		g.nonce[1][l] = uint32(p.Counter)
		g.nonce[2][l] = uint32(p.Counter >> 32)
		n := len(p.Data) - TagSize
		g.ptr[l] = unsafe.Pointer(unsafe.SliceData(p.Data))
		g.n[l] = n
		maxLen = max(maxLen, n)
	}
	return uint64(maxLen+63) / 64
}

func sealSIMD(pkts []Packet, im impl) {
	var g group
	var pg polyGroup
	var tags [lanes][TagSize]byte
	var idx [maxChunk]uint8
	w := width(im)
	for len(pkts) > 0 {
		c := pkts[:min(len(pkts), maxChunk)]
		pkts = pkts[len(c):]
		order(c, idx[:len(c)])
		for i := 0; i < len(c); i += w {
			lane := idx[i:min(i+w, len(c))]
			blocks := g.load(c, lane)
			chacha(im, &g, 0, blocks+1)
			macLanes(&pg, &g, c, lane, &tags, im)
			for l, pi := range lane {
				p := &c[pi]
				copy(p.Data[len(p.Data)-TagSize:], tags[l][:])
			}
		}
	}
	wipe(&g)
	pg.wipe()
}

func openSIMD(pkts []Packet, ok []bool, im impl) {
	var g group
	var pg polyGroup
	var tags [lanes][TagSize]byte
	var idx [maxChunk]uint8
	w := width(im)
	for len(pkts) > 0 {
		c := pkts[:min(len(pkts), maxChunk)]
		cok := ok[:len(c)]
		pkts, ok = pkts[len(c):], ok[len(c):]
		order(c, idx[:len(c)])
		for i := 0; i < len(c); i += w {
			lane := idx[i:min(i+w, len(c))]
			blocks := g.load(c, lane)
			chacha(im, &g, 0, 1)
			macLanes(&pg, &g, c, lane, &tags, im)
			for l, pi := range lane {
				p := &c[pi]
				n := len(p.Data) - TagSize
				good := subtle.ConstantTimeCompare(tags[l][:], p.Data[n:]) == 1
				cok[pi] = good
				if !good {
					g.n[l] = 0 // not decrypted: zeroed below
				}
			}
			chacha(im, &g, 1, blocks+1)
			for _, pi := range lane {
				if !cok[pi] {
					p := &c[pi]
					clear(p.Data[:len(p.Data)-TagSize])
				}
			}
		}
	}
	wipe(&g)
	pg.wipe()
}

// wipe erases g's key words and one-time keys. It is a separate,
// non-inlined function so that the stores are not removed as dead.
//
//go:noinline
func wipe(g *group) {
	clear(g.key[:])
	clear(g.polyKey[:])
}
