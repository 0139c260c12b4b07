// Package chachapoly seals and opens bursts of ChaCha20-Poly1305 messages
// (RFC 8439) at once, running independent messages side by side in SIMD
// lanes instead of one after another.
//
// WireGuard (whitepaper §5.4.6) seals every transport data message with
// ChaCha20-Poly1305 under a 64-bit counter nonce: 32 zero bits followed by
// the counter in little-endian order (RFC 8439 §2.8 with the nonce of §4).
// A fast path holds many such messages at once; at small sizes their fixed
// costs (the Poly1305 key block, the MAC set-up and finalisation) dominate,
// and they are independent, so this package computes them together.
//
// # Implementations
//
// One is chosen once at start-up from the CPU's features
// (golang.org/x/sys/cpu, which also checks that the OS saves the registers):
//
//   - avx512ifma (AVX-512 F, VL, BW, IFMA and BMI2): ChaCha20 in 16 32-bit
//     lanes of ZMM registers; Poly1305 in 16 64-bit lanes (two halves of 8)
//     with 52-bit multiply-adds, in limbs of 44, 44 and 42 bits.
//   - avx512 (AVX-512 F, VL, BW and BMI2): the same ChaCha20; Poly1305 in
//     8 64-bit lanes of YMM registers (two halves of 4, AVX2) with 32-bit
//     multiplies, in limbs of 26 bits, for full groups of 8 messages of
//     496 bytes and more, and one message at a time in Go (64-bit limbs)
//     otherwise, where that is faster (see mac8's constants for the
//     measurements).
//   - avx2: ChaCha20 in 8 lanes of YMM registers, Poly1305 as avx512, for
//     messages of up to 256 bytes; longer ones go to x/crypto one at a
//     time, whose own AVX2 code is faster there (see maxAVX2Len).
//   - generic: golang.org/x/crypto/chacha20poly1305, one message at a time.
//
// A lane of the ChaCha20 kernels is a job: a message's Poly1305 key block
// (opening: the tag is checked before anything is decrypted), the key
// block followed by the whole message (sealing: one lane a packet), a
// whole message, or a segment of a long message spread over lanes that
// would otherwise idle; jobs are ordered by length, when their lengths
// differ, so that the lanes of a pass finish together. The lanes' key
// words and Poly1305 keys are set up by small kernels of their own
// (chachaKeys16, polyKeys16) from the Keys and one-time keys. A pass of the
// AVX-512 ChaCha20 kernel runs two blocks of each of its 16 lanes, or one
// block of two groups of 16 (chacha16x2), their rounds interleaved: one
// state's rounds alone leave the processor waiting on its chains of
// dependent instructions. Lengths may differ freely within a burst:
// a message's last block is XORed under a byte mask (AVX-512) or byte by
// byte (AVX2). Messages with additional data take the Poly1305 path of one
// message at a time.
//
// The assembly is generated from Go by avo (github.com/mmcloughlin/avo); the
// generator is its own module in _asm, `go generate` reproduces
// chacha_amd64.s byte for byte, and scripts/check-generate.sh (run by CI)
// fails when it does not.
//
// # Cost
//
// BenchmarkBurst and BenchmarkShortRun time each burst call and x/crypto
// sealing or opening the same packets one call at a time, in the same loop.
// With IFMA, a burst of 64 packets of 64 bytes costs about a third of
// x/crypto per packet (min-ratio 0.33 sealing or opening with one key, 0.36
// to 0.42 with 64 keys); of 1420 bytes, 0.53 to 0.58 (AMD Zen 5, shared and
// loaded machine, BenchmarkBurst/avx512ifma). On an Intel Xeon, whose
// 512-bit integer instructions issue on two ports where Zen 5 has four,
// 46-50 ns a packet of 64 bytes (0.32-0.36 of x/crypto's 137-155 ns) and
// 400-440 ns of 1420 bytes (0.57-0.62); docs/performance.md has the
// history. A run of one or two small packets
// costs more than x/crypto (about 2x for one): the package does not switch
// to x/crypto for them, which would need an x/crypto AEAD (and its key
// copy) for every key; callers should hand whole runs.
//
// # Key memory
//
// A [Key] holds the expanded key itself; [Key.Zero] erases it. The SIMD
// implementations wipe what they copy of it during a call: the per-call
// lane state on the stack before return, and the assembly clears the
// vector registers (and its stack scratch) it used. What Go itself may
// leave is beyond the package's reach: a goroutine stack that grows
// during a call is copied and the old one freed without being erased,
// with the call's lane state in it (a probe found key words in 3% of
// freed stacks, sealing at random stack depths); Go's experimental
// runtime/secret would erase them. The generic implementation, and avx2
// for messages longer than 256 bytes, use an x/crypto AEAD, which keeps a
// private copy of the key and offers no way to erase it; it is created only
// when one of those implementations is the one in use, and [Key.Zero]
// erases that copy in place (x/crypto's AEAD is a pointer to the 32 key
// bytes; a test fails if a new x/crypto changes that layout) before
// dropping it. x/crypto's amd64 assembly leaves key rows in its stack frame
// and vector registers after a call, which the package cannot erase either.
//
// # Constant time
//
// No branch and no memory address depends on the key, the plaintext or a
// tag: the ChaCha20 and Poly1305 kernels branch only on loop counters,
// message lengths and a lane's job kind, and address memory only from
// message pointers and lengths (the Poly1305 kernels load or gather each
// lane's block from an address computed from its pointer, length and the
// step), the Keys' addresses and the one-time keys' indexes in the call's
// own array (the key set-up kernels load from them, then transpose with
// permutes whose indexes are constants); the scalar Poly1305 reduces without branches
// (a mask selects h or h-p); tags are compared in constant time (the XORs
// of their two halves folded into one word, then tested once). The
// result of a comparison is public (the packet is dropped or delivered), so
// Open branches on it to skip decrypting and to zero a failed packet. This
// was checked by reading every conditional jump and memory operand of the
// generated assembly and every branch of the Go code.
package chachapoly
