//go:build !purego

package chachapoly

import (
	"encoding/binary"
	"unsafe"
)

// polyGroup is the Poly1305 state of 16 lanes handed to poly16, for two
// halves of 8 64-bit lanes. Numbers are in three limbs of 44, 44 and 42 bits
// (radix 2^44), limb-major. Layout fixed (TestPolyGroupLayout); it lives on
// the caller's stack and is wiped before the burst call returns.
type polyGroup struct {
	r       [3][lanes]uint64      // clamped r
	s       [2][lanes]uint64      // 20·r1, 20·r2: 2^132 ≡ 20 (mod 2^130-5)
	h       [3][lanes]uint64      // accumulator, partially reduced
	msg     [lanes]unsafe.Pointer // ciphertext start
	full    [lanes]uint64         // full 16-byte blocks read from msg
	total   [lanes]uint64         // blocks in all: full, padded tail, lengths
	tailOff [lanes]uint64         // offset of tail[l] in the group
	tail    [lanes][2 * 16]byte   // padded last partial block, lengths block
	add     [2][lanes]uint64      // the addend s, low and high 64 bits
	out     [2][lanes]uint64      // the tags, low and high 64 bits (written by poly16)
	keyIdx  [lanes]uint64         // index of each lane's one-time key, read by polyKeys16
}

const (
	offPolyTail = 1536 // offset of polyGroup.tail
	mask44      = 1<<44 - 1
	mask42      = 1<<42 - 1
)

// poly16 and polyKeys16 are in chacha_amd64.s.
//
//go:noescape
func poly16(lanes *polyGroup, blocks, fast uint64)

//go:noescape
func polyKeys16(lanes *polyGroup, keys *[maxChunk][32]byte)

// load sets lane l up to MAC ct (with empty additional data) under the
// one-time key keys[key] (RFC 8439 §2.8) of the keys polyKeys16 is then
// given (which sets up r, s and h of every lane at once), and returns the
// lane's block count.
func (pg *polyGroup) load(l int, key uint8, ct []byte) (total uint64) {
	pg.keyIdx[l] = uint64(key)
	n := len(ct)
	full := n / 16
	pg.msg[l] = unsafe.Pointer(unsafe.SliceData(ct))
	pg.full[l] = uint64(full)
	t := pg.tail[l][:]
	total = uint64(full) + 1
	if rem := n % 16; rem > 0 {
		copy(t, ct[16*full:])
		clear(t[rem:16])
		t = t[16:]
		total++
	}
	binary.LittleEndian.PutUint64(t[0:], 0) // length of the additional data
	binary.LittleEndian.PutUint64(t[8:], uint64(n))
	pg.tailOff[l] = uint64(offPolyTail + 32*l)
	pg.total[l] = total
	return total
}

// idle makes lane l absorb nothing.
func (pg *polyGroup) idle(l int) {
	pg.msg[l], pg.full[l], pg.total[l], pg.keyIdx[l] = nil, 0, 0, 0
}

// tag copies lane l's tag, which poly16 finished, into out.
func (pg *polyGroup) tag(l int, out *[TagSize]byte) {
	binary.LittleEndian.PutUint64(out[0:], pg.out[0][l])
	binary.LittleEndian.PutUint64(out[8:], pg.out[1][l])
}

// wipe erases the one-time keys and accumulators.
//
//go:noinline
func (pg *polyGroup) wipe() {
	clear(pg.r[:])
	clear(pg.s[:])
	clear(pg.h[:])
	clear(pg.add[:])
	clear(pg.out[:])
}

// minIFMALanes is the fewest messages worth a poly16 pass: below it the
// scalar Poly1305 per message is faster. BenchmarkShortRun/avx512ifma,
// min-ns/pkt of the whole Seal with poly16 from 1 message against with
// this minimum (interleaved builds, AMD Zen 5): 64 B, 2 messages 321 vs
// 255, 4: 185 vs 158, 6: 142 vs 129, 8: level (119); 1420 B, 2: 1784 vs
// 1102, 4: 1122 vs 984, 6: 1057 vs 1094 (lanes 3% ahead), 8: level.
const minIFMALanes = 8

// poly8 (AVX2) pays off only on full groups of long messages: a pass costs
// the same whatever the number of lanes in use, and its per-message set-up
// (limbs of r, the tail block, the final carry) costs more than the scalar
// code's. BenchmarkBurst (seal, one key, implementation avx2, this
// machine's AVX-512 CPU with the AVX2 kernels forced; min-ns/pkt, poly8
// against scalar Poly1305): 64 B 117 vs 101, 128 B 157 vs 144, 512 B 392
// vs 400, 1420 B 963 vs 1023, mixed 372 vs 385; BenchmarkShortRun at 1420
// B: 6 messages 1676 vs 1570, 8 messages 983 vs 1038. The same holds for
// implementation avx512 (64 B 92 vs 77, 1420 B 622 vs 685).
const (
	minPoly8Lanes  = poly8Lanes // a full group
	minPoly8Blocks = 32         // messages of 496 bytes and more
)

// mac computes the tag of every packet of c into ch.tags from the one-time
// keys in ch.g.polyKey: with IFMA, 16 packets at a time in poly16; with
// AVX2 (implementations avx2 and avx512), 8 at a time in poly8. Packets
// are ordered by length so that lanes finish together, unless same says
// their messages are all of one size class (spreadOf); packets with
// additional data, and groups smaller than the kernel's minimum, take the
// scalar path (one message at a time).
func (ch *chunk) mac(im impl, c []Packet, same bool) {
	var idx [maxChunk]uint8
	switch {
	case im == implAVX512IFMA && len(c) >= minIFMALanes:
		orderByLen(c, idx[:len(c)], same)
		for start := 0; start < len(c); start += lanes {
			ch.mac16(c, idx[start:min(start+lanes, len(c))])
		}
	case im == implAVX2 || im == implAVX512:
		orderByLen(c, idx[:len(c)], same)
		for start := 0; start < len(c); start += poly8Lanes {
			ch.mac8(c, idx[start:min(start+poly8Lanes, len(c))])
		}
	default:
		for i := range c {
			ch.macScalar(c, i)
		}
	}
}

// macScalar computes the tag of packet i of c one message at a time.
func (ch *chunk) macScalar(c []Packet, i int) {
	p := &c[i]
	aeadTag(&ch.tags[i], &ch.g.polyKey[i], p.AD, p.Data[:len(p.Data)-TagSize])
}

// mac16 computes the tags of the packets of c listed in lane (at most 16)
// with poly16.
func (ch *chunk) mac16(c []Packet, lane []uint8) {
	if len(lane) < minIFMALanes {
		for _, i := range lane {
			ch.macScalar(c, int(i))
		}
		return
	}
	pg := &ch.pg
	ch.used16 = true
	// fast: the blocks every lane in use reads from its message.
	blocks, fast := uint64(0), ^uint64(0)
	for l := 0; l < lanes; l++ {
		if l >= len(lane) || len(c[lane[l]].AD) > 0 {
			pg.idle(l)
			continue
		}
		p := &c[lane[l]]
		blocks = max(blocks, pg.load(l, lane[l], p.Data[:len(p.Data)-TagSize]))
		fast = min(fast, pg.full[l])
	}
	// poly16's fast steps load every lane's blocks without a mask: an
	// idle lane reads a lane in use's message (its result is not used).
	for l := 0; l < lanes; l++ {
		if pg.total[l] != 0 {
			for k := 0; k < lanes; k++ {
				if pg.total[k] == 0 {
					pg.msg[k] = pg.msg[l]
				}
			}
			break
		}
	}
	polyKeys16(pg, &ch.g.polyKey)
	poly16(pg, blocks, min(fast, blocks))
	for l, i := range lane {
		if len(c[i].AD) > 0 {
			ch.macScalar(c, int(i))
			continue
		}
		pg.tag(l, &ch.tags[i])
	}
}

// mac8 computes the tags of the packets of c listed in lane (at most 8)
// with poly8.
func (ch *chunk) mac8(c []Packet, lane []uint8) {
	longest := 0
	for _, i := range lane {
		longest = max(longest, len(c[i].Data)-TagSize)
	}
	if !poly8Always && (len(lane) < minPoly8Lanes || (longest+15)/16+1 < minPoly8Blocks) {
		for _, i := range lane {
			ch.macScalar(c, int(i))
		}
		return
	}
	pg := &ch.pg8
	ch.used8 = true
	var blocks uint64
	for l := 0; l < poly8Lanes; l++ {
		if l >= len(lane) || len(c[lane[l]].AD) > 0 {
			pg.idle(l)
			continue
		}
		p := &c[lane[l]]
		blocks = max(blocks, pg.load(l, &ch.g.polyKey[lane[l]], p.Data[:len(p.Data)-TagSize]))
	}
	for l := 0; l < poly8Lanes; l++ {
		pg.place(l, blocks)
	}
	poly8(pg, blocks)
	for l, i := range lane {
		if len(c[i].AD) > 0 {
			ch.macScalar(c, int(i))
			continue
		}
		pg.tag(l, &ch.g.polyKey[i], &ch.tags[i])
	}
}

// orderByLen fills idx with the indexes of c ordered by the size class of
// their messages (counting sort; in order when same says they are all of
// one class: a burst of short packets).
func orderByLen(c []Packet, idx []uint8, same bool) {
	if same {
		for i := range c {
			idx[i] = uint8(i)
		}
		return
	}
	const classes = 16
	var count [classes + 1]uint8
	var class [maxChunk]uint8
	for i := range c {
		k := sizeClass(msgBlocks(&c[i]))
		class[i] = k
		count[k+1]++
	}
	for k := 1; k <= classes; k++ {
		count[k] += count[k-1]
	}
	for i := range c {
		k := class[i]
		idx[count[k]] = uint8(i)
		count[k]++
	}
}

// msgBlocks is the number of 64-byte blocks of p's message.
func msgBlocks(p *Packet) int { return (len(p.Data) - TagSize + 63) / 64 }
