//go:build !purego

package chachapoly

// maxAVX2Len is the longest message, in bytes, that the avx2
// implementation seals or opens with its own kernels. Longer ones go to
// x/crypto one at a time: its AVX2 code, which interleaves Poly1305 with
// ChaCha20 in one message, is faster there than 8 lanes of ChaCha20 and a
// separate Poly1305 pass. BenchmarkBurst (implementation avx2 forced on this
// project's AVX-512 test machine, one key, min-ratio = burst / x/crypto,
// 2026-12-02): seal 128 B 0.69, 256 B 0.98–0.99, 320 B 1.01–1.11, 384 B
// 1.16, 512 B 1.25, 1420 B 1.32; open 128 B 0.70, 256 B 1.00, 320 B 1.09,
// 512 B 0.99–1.04, 1420 B 1.26–1.29. The AVX-512 implementations stay
// ahead at every length and keep every message.
const maxAVX2Len = 256

// hasLong reports whether a message of c is longer than maxAVX2Len.
func hasLong(c []Packet) bool {
	for i := range c {
		if len(c[i].Data)-TagSize > maxAVX2Len {
			return true
		}
	}
	return false
}

// sealMixed seals c (at most maxChunk packets): the messages longer than
// maxAVX2Len with x/crypto, the others with im's kernels, from copies of
// their Packets (the copies share Data, so the results land in place).
func (ch *chunk) sealMixed(c []Packet, im impl) {
	var short [maxChunk]Packet
	n := 0
	for i := range c {
		if len(c[i].Data)-TagSize > maxAVX2Len {
			sealGeneric(c[i : i+1])
			continue
		}
		short[n] = c[i]
		n++
	}
	if n > 0 {
		ch.seal(short[:n], im)
	}
}

// openMixed opens c (at most maxChunk packets) as sealMixed seals it, with
// each packet's result in ok.
func (ch *chunk) openMixed(c []Packet, ok []bool, im impl) {
	var short [maxChunk]Packet
	var at [maxChunk]uint8
	var shortOK [maxChunk]bool
	n := 0
	for i := range c {
		if len(c[i].Data)-TagSize > maxAVX2Len {
			openGeneric(c[i:i+1], ok[i:i+1])
			continue
		}
		short[n], at[n] = c[i], uint8(i)
		n++
	}
	if n == 0 {
		return
	}
	ch.open(short[:n], shortOK[:n], im)
	for j, i := range at[:n] {
		ok[i] = shortOK[j]
	}
}
