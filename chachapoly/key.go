package chachapoly

import (
	"crypto/cipher"
	"encoding/binary"

	"golang.org/x/crypto/chacha20poly1305"
)

// Sizes, RFC 8439 §2.8.
const (
	KeySize = 32 // bytes of a ChaCha20-Poly1305 key
	TagSize = 16 // bytes of a Poly1305 tag
)

// Key is an expanded ChaCha20-Poly1305 key: the eight 32-bit key words of the
// ChaCha20 state (RFC 8439 §2.3).
//
// The zero Key is not usable: call [Key.Set] first. A Key not Set, or
// erased by [Key.Zero], works as the all-zero key, a key everyone knows (a
// sealed packet anyone can read, forgeries accepted): its owner must not
// hand it to [Seal] or [Open] (fastpath checks a keypair's Dead flag before
// it does). [Seal] and [Open] do not check it for every packet: reading
// the key words once per run of a key cost 7 ns a packet of a burst for
// 1,000 peers (BenchmarkPeers, 5 December), a flag beside them a second
// cache line of every keypair. A Key is set once and
// then only read by [Seal] and [Open], which may run concurrently on any
// number of goroutines with the same Key. [Key.Set] and [Key.Zero] must not
// run concurrently with a Seal or Open that uses the Key: the owner calls
// Zero only after the last user is done (for WireGuard, after the grace
// period in which a worker may still hold the keypair).
//
// A Key must not be copied after Set: a copy is key memory that Zero does not
// erase.
type Key struct {
	w [8]uint32 // key words, little-endian from the key bytes

	// aead is x/crypto's AEAD for the messages sealed one at a time: nil
	// unless the generic implementation (every message) or avx2 (messages
	// longer than maxAVX2Len) was in use when Set ran. It holds a private
	// key copy, which Zero and Set erase in place (wipeAEAD).
	aead *xAEAD
}

// Set expands key into k, replacing what k held.
func (k *Key) Set(key *[KeySize]byte) {
	for i := range k.w {
		k.w[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	if k.aead != nil {
		wipeAEAD(k.aead.AEAD)
	}
	k.aead = nil
	if active == implGeneric || active == implAVX2 {
		k.aead = &xAEAD{newAEAD(key)}
	}
}

// Zero erases the key words held by k, and the key copy inside x/crypto's
// AEAD if k has one (the generic implementation, avx2's long messages),
// which it then drops. k is unusable afterwards until the next Set.
func (k *Key) Zero() {
	clear(k.w[:])
	if k.aead != nil {
		wipeAEAD(k.aead.AEAD)
	}
	k.aead = nil
}

// IsZero reports whether k holds no key (the zero Key, or one erased by
// Zero): for tests and checks that key memory was erased. It reads every
// word, whatever their values.
func (k *Key) IsZero() bool {
	var or uint32
	for _, w := range k.w {
		or |= w
	}
	return or == 0 && k.aead == nil
}

// xAEAD holds x/crypto's AEAD behind a pointer (8 bytes where the
// interface takes 16).
type xAEAD struct{ cipher.AEAD }

// bytes writes the key back into b; the caller erases b after use.
func (k *Key) bytes(b *[KeySize]byte) {
	for i, w := range k.w {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
}

func newAEAD(key *[KeySize]byte) cipher.AEAD {
	a, err := chacha20poly1305.New(key[:])
	if err != nil {
		panic("chachapoly: " + err.Error()) // unreachable: the size is fixed
	}
	return a
}
