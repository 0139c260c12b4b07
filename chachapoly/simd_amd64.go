//go:build !purego

package chachapoly

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// lanes is the number of messages one AVX-512 ChaCha20 pass handles: one
// per 32-bit lane of a 512-bit register.
const lanes = 16

// group is the state of 16 lanes handed to the assembly: each lane XORs a
// run of consecutive ChaCha20 key stream blocks (from block counter ctr on)
// into n bytes at ptr. A lane is a job: a packet's Poly1305 key (the first
// 32 bytes of its block 0, stored into polyKey) alone or followed by its
// message, its whole message, or a segment of a long message spread over
// idle lanes. Layout fixed (the generator in _asm
// hard-codes the offsets; TestGroupLayout checks them). It lives on the
// caller's stack and is wiped before the burst call returns.
type group struct {
	key   [8][lanes]uint32      // key words, word-major: key[w][l] is word w of lane l
	nonce [3][lanes]uint32      // nonce words 13..15 of the state, word-major
	ptr   [lanes]unsafe.Pointer // start of each lane's bytes (nil if idle)
	n     [lanes]int            // bytes of each lane (0 if idle)
	ctr   [lanes]uint32         // block counter of each lane's first block
	rel   [lanes]uint64         // if not 0, the lane begins with a Poly1305 key, stored at this offset in the group (job)

	// polyKey holds the one-time Poly1305 keys of a chunk (RFC 8439
	// §2.6), written by lanes whose rel points here. Kept inside the
	// group, addressed by offset, so that no pointer into this stack
	// object is stored in it (which would move it to the heap).
	polyKey [maxChunk][32]byte

	// keyOf[l] is the Key whose words lane l holds in key: a lane keeps
	// its key words from one pass to the next when the key is the same,
	// as in a one-key burst; chachaKeys16 loads them from here.
	keyOf [lanes]*Key
}

const offPolyKey = 1152 // offset of group.polyKey

// chachaKeys16 is in chacha_amd64.s.
//
//go:noescape
func chachaKeys16(lanes *group)

// chacha16 is in chacha_amd64.s.
//
//go:noescape
func chacha16(lanes *group, blocks uint64)

// chacha16x2 is in chacha_amd64.s.
//
//go:noescape
func chacha16x2(a, b *group)

// chacha8 is in chacha_amd64.s.
//
//go:noescape
func chacha8(lanes *group, blocks uint64)

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

// chacha runs blocks 0..blocks-1 of g's lanes with im's kernel.
func chacha(im impl, g *group, blocks uint64) {
	if blocks == 0 {
		return
	}
	if im == implAVX2 {
		chacha8(g, blocks)
		return
	}
	chacha16(g, blocks)
}

// maxChunk is how many packets are scheduled at once.
const maxChunk = 64

// job is a run of key stream blocks for one packet: counter ctr on, XORed
// into n bytes at offset off of the packet's Data; or, if rel is not 0, a
// run from block 0 that begins with the packet's Poly1305 key (the first
// 32 bytes of block 0, stored at offset rel in the group), followed by
// its message (block j > 0 XORed into bytes 64(j-1) on; off is 0 and n
// counts the key's 64 bytes, or is 32 for a key alone). It holds no pointer, so
// that moving jobs is a plain copy.
// Sixteen bytes, so that the chunk's two job arrays (zeroed with the rest
// of the chunk on every call) stay small: a message is shorter than 2^31
// bytes (a Go slice of a WireGuard packet is far shorter; check panics
// otherwise) and rel is below 2^16.
type job struct {
	off int32
	n   int32
	ctr uint32
	rel uint16
	pkt uint8 // index of the packet in the chunk (for its key, nonce and Data)
}

func (j *job) blocks() int { return (int(j.n) + 63) / 64 }

// sizeClass is the bit length of a job's block count: jobs of one class
// differ in length by less than 2x.
func sizeClass(blocks int) uint8 {
	return uint8(min(bits.Len(uint(blocks)), 15))
}

// sortJobs orders jobs by size class (a counting sort: linear, stable), so
// that a group of lanes holds jobs of similar length and few lanes idle
// while the longest finishes, and returns them: jobs itself when same
// (the caller knows they are all of one class: a burst of short packets),
// else out[:len(jobs)].
func sortJobs(jobs, out []job, same bool) []job {
	if same || len(jobs) == 0 {
		return jobs
	}
	const classes = 16
	var count [classes + 1]int
	var class [maxChunk]uint8
	for i := range jobs {
		c := sizeClass(jobs[i].blocks())
		class[i] = c
		count[c+1]++
	}
	out = out[:len(jobs)]
	for c := 1; c <= classes; c++ {
		count[c] += count[c-1]
	}
	for i := range jobs {
		c := class[i]
		out[count[c]] = jobs[i]
		count[c]++
	}
	return out
}

// run computes all jobs (sorted by sortJobs), w lanes at a time, in g (and
// g2). A group with idle lanes splits its longest jobs into segments over
// them (a job of b blocks into two of b/2 and b-b/2), so that a lone long
// message costs few passes. Two groups of one block each (open's Poly1305
// keys, 64-byte messages) run in one pass of two interleaved states
// (chacha16x2, AVX-512), their Poly1305 keys stored into g.
func run(im impl, g, g2 *group, c []Packet, jobs []job) {
	w := width(im)
	var split [lanes]job
	for start := 0; start < len(jobs); {
		end := min(start+w, len(jobs))
		blocks := fill(im, g, c, jobs[start:end], w, &split)
		start = end
		if im != implAVX2 && blocks == 1 && start < len(jobs) && oneBlock(jobs[start:min(start+w, len(jobs))]) {
			end = min(start+w, len(jobs))
			fill(im, g2, c, jobs[start:end], w, &split)
			start = end
			chacha16x2(g, g2)
			continue
		}
		chacha(im, g, uint64(blocks))
	}
}

// oneBlock reports whether every job of jobs is one block long.
func oneBlock(jobs []job) bool {
	for i := range jobs {
		if jobs[i].blocks() != 1 {
			return false
		}
	}
	return true
}

// fill sets g's lanes up for lane (at most w jobs; with fewer, its longest
// jobs split over the idle lanes, in split) and returns the most blocks a
// lane runs.
func fill(im impl, g *group, c []Packet, lane []job, w int, split *[lanes]job) int {
	m := len(lane)
	if m < w {
		lane = split[:copy(split[:], lane)]
	}
	for m < w {
		long, lb := -1, 1
		for l := 0; l < m; l++ {
			if b := lane[l].blocks(); b > lb {
				long, lb = l, b
			}
		}
		if long < 0 {
			break
		}
		a := &lane[long]
		h := lb / 2
		off := a.off + int32(64*h)
		if a.rel != 0 { // block 0 is the key: block h is at 64(h-1)
			off -= 64
		}
		lane = append(lane, job{off: off, n: a.n - int32(64*h), ctr: a.ctr + uint32(h), pkt: a.pkt})
		a.n = int32(64 * h)
		m++
	}
	blocks, reload := 0, false
	for l := 0; l < lanes; l++ {
		if l >= m {
			g.ptr[l], g.n[l], g.ctr[l], g.rel[l] = nil, 0, 0, 0
			continue
		}
		j := &lane[l]
		p := &c[j.pkt]
		if g.keyOf[l] != p.Key {
			g.keyOf[l] = p.Key
			reload = true
			if im == implAVX2 {
				k := &p.Key.w
				g.key[0][l], g.key[1][l], g.key[2][l], g.key[3][l] = k[0], k[1], k[2], k[3]
				g.key[4][l], g.key[5][l], g.key[6][l], g.key[7][l] = k[4], k[5], k[6], k[7]
			}
		}
		g.nonce[0][l] = p.nonce0
		g.nonce[1][l] = uint32(p.Counter)
		g.nonce[2][l] = uint32(p.Counter >> 32)
		g.ptr[l] = unsafe.Add(unsafe.Pointer(unsafe.SliceData(p.Data)), int(j.off))
		g.n[l], g.ctr[l], g.rel[l] = int(j.n), j.ctr, uint64(j.rel)
		blocks = max(blocks, j.blocks())
	}
	if reload && im != implAVX2 {
		// Loaded and transposed in the kernel: a burst to 64 peers loaded 64
		// keys' words here one by one (BenchmarkPeers).
		chachaKeys16(g)
	}
	return blocks
}

// chunk is the per-call scratch of the SIMD paths, on the caller's stack.
type chunk struct {
	g      group
	g2     group // the second group of a chacha16x2 pass
	pg     polyGroup
	pg8    poly8Group
	tags   [maxChunk][TagSize]byte
	jobs   [maxChunk]job // at most one a packet (keyJobs, dataJobs, sealJobs)
	sorted [maxChunk]job

	// What wipe must erase: the one-time keys of the first keys packets,
	// and the Poly1305 groups used.
	keys          int
	used16, used8 bool
}

// spread summarizes the message lengths of a chunk: whether they are all
// of one size class (sizeClass of their 64-byte blocks), and so are the
// jobs of sealing them (key block and message in one lane), so that
// neither the jobs nor the Poly1305 lanes need ordering by length.
type spread struct{ msgs, sealJobs bool }

// spreadOf is c's spread, from its shortest and longest packet: the block
// count's size class grows with the length.
func spreadOf(c []Packet) spread {
	lo, hi := len(c[0].Data), len(c[0].Data)
	for i := range c {
		lo, hi = min(lo, len(c[i].Data)), max(hi, len(c[i].Data))
	}
	bl, bh := (lo-TagSize+63)/64, (hi-TagSize+63)/64
	return spread{
		msgs:     sizeClass(bl) == sizeClass(bh),
		sealJobs: sizeClass(bl+1) == sizeClass(bh+1),
	}
}

// keyJobs lists the Poly1305 key blocks (block 0, first 32 bytes) of the
// packets of c, stored into ch.g.polyKey (not XORed: the slots need no
// clearing, and the kernels do not load them). The jobs are written in
// place in ch.jobs, as dataJobs' and sealJobs': an append a job cost 4-5
// ns each on an Intel Xeon (BenchmarkBurst at 64 B, 72 against 62 ns a
// packet).
func (ch *chunk) keyJobs(c []Packet) []job {
	ch.keys = max(ch.keys, len(c))
	jobs := ch.jobs[:len(c)]
	for i := range c {
		jobs[i] = job{rel: uint16(offPolyKey + 32*i), n: 32, ctr: 0, pkt: uint8(i)}
	}
	return jobs
}

// dataJobs lists the message (from block 1) of every packet of c whose ok
// is true.
func (ch *chunk) dataJobs(c []Packet, ok []bool) []job {
	jobs := ch.jobs[:len(c)]
	k := 0
	for i := range c {
		n := len(c[i].Data) - TagSize
		if n == 0 || !ok[i] {
			continue
		}
		jobs[k] = job{n: int32(n), ctr: 1, pkt: uint8(i)}
		k++
	}
	return jobs[:k]
}

// sealJobs lists the jobs of sealing c, one a packet: its Poly1305 key
// (block 0, stored into ch.g.polyKey) and then its message (blocks 1 on)
// in one lane, so that a burst of short packets takes half the passes,
// and half the lane set-ups, of a key job and a message job apiece.
func (ch *chunk) sealJobs(c []Packet) []job {
	ch.keys = max(ch.keys, len(c))
	jobs := ch.jobs[:len(c)]
	for i := range c {
		jobs[i] = job{rel: uint16(offPolyKey + 32*i), n: int32(64 + len(c[i].Data) - TagSize), pkt: uint8(i)}
	}
	return jobs
}

// runJobs runs jobs, ordered by length unless same says they are of one
// size class.
func (ch *chunk) runJobs(im impl, c []Packet, jobs []job, same bool) {
	run(im, &ch.g, &ch.g2, c, sortJobs(jobs, ch.sorted[:], same))
}

func sealSIMD(pkts []Packet, im impl) {
	var ch chunk
	for len(pkts) > 0 {
		c := pkts[:min(len(pkts), maxChunk)]
		pkts = pkts[len(c):]
		if im == implAVX2 && hasLong(c) {
			ch.sealMixed(c, im)
			continue
		}
		ch.seal(c, im)
	}
	ch.wipe()
}

// seal seals the packets of c (at most maxChunk) with im's kernels.
func (ch *chunk) seal(c []Packet, im impl) {
	sp := spreadOf(c)
	ch.runJobs(im, c, ch.sealJobs(c), sp.sealJobs)
	ch.mac(im, c, sp.msgs)
	for i := range c {
		d := c[i].Data
		copy(d[len(d)-TagSize:], ch.tags[i][:])
	}
}

func openSIMD(pkts []Packet, ok []bool, im impl) {
	var ch chunk
	for len(pkts) > 0 {
		c := pkts[:min(len(pkts), maxChunk)]
		cok := ok[:len(c)]
		pkts, ok = pkts[len(c):], ok[len(c):]
		if im == implAVX2 && hasLong(c) {
			ch.openMixed(c, cok, im)
			continue
		}
		ch.open(c, cok, im)
	}
	ch.wipe()
}

// open opens the packets of c (at most maxChunk) with im's kernels, with
// the results in ok.
func (ch *chunk) open(c []Packet, ok []bool, im impl) {
	sp := spreadOf(c)
	ch.runJobs(im, c, ch.keyJobs(c), true) // all one block
	ch.mac(im, c, sp.msgs)
	for i := range c {
		d := c[i].Data
		ok[i] = tagEqual(&ch.tags[i], (*[TagSize]byte)(d[len(d)-TagSize:]))
	}
	ch.runJobs(im, c, ch.dataJobs(c, ok), sp.msgs) // a subset of the messages
	for i := range c {
		if !ok[i] {
			d := c[i].Data
			clear(d[:len(d)-TagSize])
			clear(ch.tags[i][:]) // the tag a forgery lacked
		}
	}
}

// wipe erases the key words, one-time keys and Poly1305 state. It is not
// inlined, so that the stores are not removed as dead.
//
//go:noinline
func (ch *chunk) wipe() {
	clear(ch.g.key[:])
	clear(ch.g.keyOf[:])
	clear(ch.g2.key[:])
	clear(ch.g2.keyOf[:])
	clear(ch.g.polyKey[:ch.keys])
	if ch.used16 {
		ch.pg.wipe()
	}
	if ch.used8 {
		ch.pg8.wipe()
	}
}

// tagEqual compares two tags in constant time: the time does not depend on
// where they differ (two 64-bit XORs folded, then one test of the result,
// which is public).
func tagEqual(a, b *[TagSize]byte) bool {
	x := binary.LittleEndian.Uint64(a[:8]) ^ binary.LittleEndian.Uint64(b[:8])
	y := binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(b[8:])
	return x|y == 0
}
