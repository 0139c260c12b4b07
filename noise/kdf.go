package noise

import (
	"crypto/subtle"

	"golang.org/x/crypto/blake2s"
)

// The hash, HMAC and HKDF of section 5.4 (Noise section 4.3): HASH is
// BLAKE2s-256, HMAC is RFC 2104 over BLAKE2s (block size 64), KDFn is HKDF
// (RFC 5869) with an empty info and one-byte counters. The inputs the
// handshake feeds them are short, so they are laid out in stack buffers and
// hashed in one call, without allocation.

const hmacBlockSize = blake2s.BlockSize // 64

// maxShortInput is the longest input hashed from a stack buffer; longer
// inputs take the streaming (allocating) path.
const maxShortInput = 64

// mixHash sets dst = HASH(h || data).
func mixHash(dst, h *[KeySize]byte, data []byte) {
	if len(data) > maxShortInput {
		mixHashSlow(dst, h, data)
		return
	}
	var buf [KeySize + maxShortInput]byte
	copy(buf[:], h[:])
	n := copy(buf[KeySize:], data)
	*dst = blake2s.Sum256(buf[:KeySize+n])
	clear(buf[:])
}

// mixHashSlow is mixHash for long inputs (not reached by the handshake). It
// hashes copies, so that the caller's arrays do not escape to the heap.
func mixHashSlow(dst, h *[KeySize]byte, data []byte) {
	buf := make([]byte, 0, KeySize+len(data))
	buf = append(append(buf, h[:]...), data...)
	*dst = blake2s.Sum256(buf)
	clear(buf)
}

// hmac2 sets sum = HMAC(key, in0 || in1). key is at most 64 bytes (all our
// keys are 32).
func hmac2(sum *[KeySize]byte, key, in0, in1 []byte) {
	var buf [hmacBlockSize + maxShortInput]byte
	n := len(in0) + len(in1)
	if len(key) > hmacBlockSize || n > maxShortInput {
		// Not reached by the handshake; kept so the function is total.
		hmacSlow(sum, key, in0, in1)
		return
	}
	copy(buf[:], key)
	for i := range hmacBlockSize {
		buf[i] ^= 0x36
	}
	copy(buf[hmacBlockSize:], in0)
	copy(buf[hmacBlockSize+len(in0):], in1)
	inner := blake2s.Sum256(buf[:hmacBlockSize+n])
	clear(buf[:])
	copy(buf[:], key)
	for i := range hmacBlockSize {
		buf[i] ^= 0x5c
	}
	copy(buf[hmacBlockSize:], inner[:])
	*sum = blake2s.Sum256(buf[:hmacBlockSize+KeySize])
	clear(buf[:])
	clear(inner[:])
}

func hmacSlow(sum *[KeySize]byte, key, in0, in1 []byte) {
	var k [hmacBlockSize]byte
	if len(key) > hmacBlockSize {
		h := blake2s.Sum256(key)
		copy(k[:], h[:])
	} else {
		copy(k[:], key)
	}
	var pad [hmacBlockSize]byte
	for i := range pad {
		pad[i] = k[i] ^ 0x36
	}
	// Hash copies in one call, so that nothing of the caller's escapes.
	buf := make([]byte, 0, hmacBlockSize+len(in0)+len(in1))
	buf = append(append(append(buf, pad[:]...), in0...), in1...)
	inner := blake2s.Sum256(buf)
	clear(buf)
	var outer [hmacBlockSize + KeySize]byte
	for i := range pad {
		outer[i] = k[i] ^ 0x5c
	}
	copy(outer[hmacBlockSize:], inner[:])
	*sum = blake2s.Sum256(outer[:])
	clear(k[:])
	clear(pad[:])
	clear(inner[:])
	clear(outer[:])
}

var (
	one   = []byte{1}
	two   = []byte{2}
	three = []byte{3}
)

// kdf1 sets t0 = KDF1(key, input).
func kdf1(t0 *[KeySize]byte, key, input []byte) {
	var prk [KeySize]byte
	hmac2(&prk, key, input, nil)
	hmac2(t0, prk[:], one, nil)
	clear(prk[:])
}

// kdf2 sets (t0, t1) = KDF2(key, input).
func kdf2(t0, t1 *[KeySize]byte, key, input []byte) {
	var prk [KeySize]byte
	hmac2(&prk, key, input, nil)
	hmac2(t0, prk[:], one, nil)
	hmac2(t1, prk[:], t0[:], two)
	clear(prk[:])
}

// kdf3 sets (t0, t1, t2) = KDF3(key, input).
func kdf3(t0, t1, t2 *[KeySize]byte, key, input []byte) {
	var prk [KeySize]byte
	hmac2(&prk, key, input, nil)
	hmac2(t0, prk[:], one, nil)
	hmac2(t1, prk[:], t0[:], two)
	hmac2(t2, prk[:], t1[:], three)
	clear(prk[:])
}

// mac sets out = MAC(key, data): keyed BLAKE2s with a 16-byte output
// (section 5.4, "MAC(key, input)"), as used for MAC1, MAC2 and cookies.
func mac(out *[MACSize]byte, key []byte, data []byte) {
	d, _ := blake2s.New128(key) // key is 16 or 32 bytes: never an error
	d.Write(data)
	d.Sum(out[:0])
}

// labelKey returns HASH(label || pub): the MAC1 key (LabelMAC1) or the
// cookie encryption key (LabelCookie) of the holder of pub (section 5.4.4,
// 5.4.7).
func labelKey(label string, pub *PublicKey) [KeySize]byte {
	var buf [8 + KeySize]byte
	copy(buf[:], label)
	copy(buf[8:], pub[:])
	return blake2s.Sum256(buf[:])
}

// initialChainKey = HASH(Construction); initialHash = HASH(initialChainKey ||
// Identifier) (section 5.4.2).
var initialChainKey, initialHash = func() ([KeySize]byte, [KeySize]byte) {
	ck := blake2s.Sum256([]byte(Construction))
	var h [KeySize]byte
	mixHash(&h, &ck, []byte(Identifier))
	return ck, h
}()

// isZero reports in constant time whether b is all zeros.
func isZero(b []byte) bool {
	var acc byte
	for _, x := range b {
		acc |= x
	}
	return subtle.ConstantTimeByteEq(acc, 0) == 1
}
