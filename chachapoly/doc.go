// Package chachapoly seals and opens bursts of ChaCha20-Poly1305 messages
// (RFC 8439) at once, running independent messages side by side in SIMD
// lanes instead of one after another.
//
// WireGuard (whitepaper §5.4.6) seals every transport data message with
// ChaCha20-Poly1305 under a 64-bit counter nonce: 32 zero bits followed by
// the counter in little-endian order (RFC 8439 §2.8 with the nonce of §4).
// A fast path holds many such messages at once; their fixed costs (the
// Poly1305 key block, the MAC set-up and finalisation) dominate at small
// sizes, and they are independent, so this package computes them together:
//
//   - AVX-512 (F, VL, BW): 16 ChaCha20 states at once, one message per 32-bit
//     lane; with IFMA, Poly1305 of 8 messages at once in 52-bit limbs.
//   - a portable fallback that calls golang.org/x/crypto/chacha20poly1305 for
//     each message.
//
// The output is byte-identical to golang.org/x/crypto/chacha20poly1305 (and so
// to RFC 8439) for every implementation; the tests check this for every
// length from 0 to 2048 bytes, with each implementation forced in turn.
//
// Key memory: a [Key] holds the expanded key itself; [Key.Zero] erases it.
// The SIMD implementations keep no other copy beyond the duration of a call
// (the per-call lane state on the stack is wiped before return). The fallback
// uses an x/crypto AEAD, which keeps a private copy of the key that this
// package cannot erase; it is created only when the fallback is the
// implementation in use, and dropped (left to the garbage collector) by
// [Key.Zero].
//
// Constant time: no branch and no memory index depends on the key, the
// plaintext or the tag; tags are compared in constant time. Branches depend
// only on message lengths and on the authentication result of a message,
// which are public.
package chachapoly
