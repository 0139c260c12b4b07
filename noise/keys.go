package noise

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// PrivateKey is a Curve25519 private key (section 5.4). Its zero value is the
// absent key. String redacts it; Base64 and Hex print it.
type PrivateKey [KeySize]byte

// PublicKey is a Curve25519 public key.
type PublicKey [KeySize]byte

// PresharedKey is the optional symmetric key mixed into the handshake
// (section 5.2, "psk"); the zero value means none, which is the same on the
// wire as no pre-shared key (section 5.4.3: Q defaults to 0^32).
type PresharedKey [KeySize]byte

// ErrKeyFormat is wrapped by the Parse functions for input that is not a
// 32-byte key in the expected encoding.
var ErrKeyFormat = errors.New("not a 32-byte key")

// NewPrivateKey returns a random, clamped private key (crypto/rand).
func NewPrivateKey() (PrivateKey, error) {
	var k PrivateKey
	if _, err := rand.Read(k[:]); err != nil {
		return PrivateKey{}, fmt.Errorf("generate private key: %w", err)
	}
	k.Clamp()
	return k, nil
}

// NewPresharedKey returns a random pre-shared key (crypto/rand), as `wg genpsk`.
func NewPresharedKey() (PresharedKey, error) {
	var k PresharedKey
	if _, err := rand.Read(k[:]); err != nil {
		return PresharedKey{}, fmt.Errorf("generate preshared key: %w", err)
	}
	return k, nil
}

// Clamp applies the Curve25519 clamping of RFC 7748 section 5 (clear the 3
// low bits, clear bit 255, set bit 254), as `wg genkey` does. X25519 clamps
// on use anyway; clamping at generation makes the stored key canonical.
func (k *PrivateKey) Clamp() {
	k[0] &= 248
	k[31] = k[31]&127 | 64
}

// PublicKey derives the public key: X25519(k, 9). One Curve25519 operation.
func (k *PrivateKey) PublicKey() PublicKey {
	var pub PublicKey
	if s, err := k.scalar(); err == nil { // never fails with 32 bytes
		copy(pub[:], s.PublicKey().Bytes())
	}
	return pub
}

// scalar returns k as a crypto/ecdh key, which computes its public key at
// once (one Curve25519 operation). Every X25519 with a key goes through
// such a value, made once per key and kept: golang.org/x/crypto/curve25519's
// X25519(scalar, point) makes one per call, and so costs two scalar
// multiplications where one is needed.
func (k *PrivateKey) scalar() (*ecdh.PrivateKey, error) {
	return ecdh.X25519().NewPrivateKey(k[:])
}

// parseKey decodes s into dst: enc "base64" takes the 44 characters
// that wg(8) writes and nothing else (wireguard-tools encoding.c,
// key_from_base64: padded, and the two bits past the key in the 43rd
// character zero), so that a file wg-quick refuses is refused here too,
// and a key that parses prints back as it was written; any other enc
// takes 64 hex digits (the UAPI).
func parseKey(dst *[KeySize]byte, s string, what, enc string) error {
	var n int
	var err error
	var buf [KeySize + 3]byte
	switch enc {
	case "base64":
		if len(s) != base64.StdEncoding.EncodedLen(KeySize) {
			return fmt.Errorf("parse %s: %w", what, ErrKeyFormat)
		}
		n, err = base64.StdEncoding.Strict().Decode(buf[:], []byte(s))
	default:
		if len(s) != 2*KeySize {
			return fmt.Errorf("parse %s: %w", what, ErrKeyFormat)
		}
		n, err = hex.Decode(buf[:], []byte(s))
	}
	if err != nil || n != KeySize {
		clear(buf[:])
		return fmt.Errorf("parse %s: %w", what, ErrKeyFormat)
	}
	copy(dst[:], buf[:KeySize])
	clear(buf[:])
	return nil
}

// ParsePrivateKey parses the standard base64 form (44 characters) used by
// wg(8) and wg-quick configuration files. The key is stored as given, not
// clamped, so that it prints back unchanged.
func ParsePrivateKey(s string) (PrivateKey, error) {
	var k PrivateKey
	return k, parseKey((*[KeySize]byte)(&k), s, "private key", "base64")
}

// ParsePrivateKeyHex parses the 64-digit hex form used by the UAPI.
func ParsePrivateKeyHex(s string) (PrivateKey, error) {
	var k PrivateKey
	return k, parseKey((*[KeySize]byte)(&k), s, "private key", "hex")
}

// ParsePublicKey parses the standard base64 form (44 characters).
func ParsePublicKey(s string) (PublicKey, error) {
	var k PublicKey
	return k, parseKey((*[KeySize]byte)(&k), s, "public key", "base64")
}

// ParsePublicKeyHex parses the 64-digit hex form used by the UAPI.
func ParsePublicKeyHex(s string) (PublicKey, error) {
	var k PublicKey
	return k, parseKey((*[KeySize]byte)(&k), s, "public key", "hex")
}

// ParsePresharedKey parses the standard base64 form (44 characters).
func ParsePresharedKey(s string) (PresharedKey, error) {
	var k PresharedKey
	return k, parseKey((*[KeySize]byte)(&k), s, "preshared key", "base64")
}

// ParsePresharedKeyHex parses the 64-digit hex form used by the UAPI.
func ParsePresharedKeyHex(s string) (PresharedKey, error) {
	var k PresharedKey
	return k, parseKey((*[KeySize]byte)(&k), s, "preshared key", "hex")
}

// Base64 returns the standard base64 form (wg-quick files, `wg show`).
func (k PrivateKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Hex returns the lowercase hex form (UAPI).
func (k PrivateKey) Hex() string { return hex.EncodeToString(k[:]) }

// String returns "(hidden)" so that a private key never reaches a log by
// accident; use Base64 or Hex to print it.
func (k PrivateKey) String() string { return "(hidden)" }

// IsZero reports in constant time whether k is all zeros (no key).
func (k *PrivateKey) IsZero() bool { return isZero(k[:]) }

// Equal reports in constant time whether k and o are equal.
func (k *PrivateKey) Equal(o *PrivateKey) bool { return subtle.ConstantTimeCompare(k[:], o[:]) == 1 }

// Zero overwrites k with zeros.
func (k *PrivateKey) Zero() { clear(k[:]) }

// Base64 returns the standard base64 form.
func (k PublicKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Hex returns the lowercase hex form (UAPI).
func (k PublicKey) Hex() string { return hex.EncodeToString(k[:]) }

// String returns the base64 form.
func (k PublicKey) String() string { return k.Base64() }

// IsZero reports in constant time whether k is all zeros.
func (k *PublicKey) IsZero() bool { return isZero(k[:]) }

// Equal reports in constant time whether k and o are equal.
func (k *PublicKey) Equal(o *PublicKey) bool { return subtle.ConstantTimeCompare(k[:], o[:]) == 1 }

// Base64 returns the standard base64 form.
func (k PresharedKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Hex returns the lowercase hex form (UAPI).
func (k PresharedKey) Hex() string { return hex.EncodeToString(k[:]) }

// String returns "(hidden)"; use Base64 or Hex to print the key.
func (k PresharedKey) String() string { return "(hidden)" }

// IsZero reports in constant time whether k is all zeros (no pre-shared key).
func (k *PresharedKey) IsZero() bool { return isZero(k[:]) }

// Equal reports in constant time whether k and o are equal.
func (k *PresharedKey) Equal(o *PresharedKey) bool {
	return subtle.ConstantTimeCompare(k[:], o[:]) == 1
}

// Zero overwrites k with zeros.
func (k *PresharedKey) Zero() { clear(k[:]) }

// dh sets out = X25519(priv, pub), one scalar multiplication, and counts
// one Curve25519 operation in st. It fails with DropInvalidPublicKey when
// the result is all zeros (pub is a low-order point; Noise section 12.1,
// wireguard-go, the kernel), or when priv is nil (a zeroed identity or an
// exchange without an ephemeral key).
func dh(out *[KeySize]byte, priv *ecdh.PrivateKey, pub *PublicKey, st *Stats) error {
	st.curve25519.Add(1)
	clear(out[:])
	if priv == nil {
		return DropInvalidPublicKey
	}
	p, err := ecdh.X25519().NewPublicKey(pub[:])
	if err != nil {
		return DropInvalidPublicKey
	}
	r, err := priv.ECDH(p)
	if err != nil {
		return DropInvalidPublicKey
	}
	copy(out[:], r)
	clear(r)
	return nil
}
