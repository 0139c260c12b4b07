package chachapoly

import (
	"crypto/cipher"
	"reflect"
)

// keyBytesType is the type of the one field of x/crypto's ChaCha20-Poly1305
// AEAD (golang.org/x/crypto/chacha20poly1305: the key, 32 bytes).
var keyBytesType = reflect.TypeFor[[KeySize]byte]()

// aeadKeyMemory returns the key bytes held inside a, an AEAD made by
// newAEAD, or nil if a does not have the layout this package knows: a
// pointer to a struct whose only field is the key array. x/crypto offers
// no way to erase its copy; TestWipeAEAD fails when its layout changes,
// so that a new x/crypto cannot silently leave keys behind.
func aeadKeyMemory(a cipher.AEAD) *[KeySize]byte {
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	t := v.Type().Elem()
	if t.Kind() != reflect.Struct || t.NumField() != 1 || t.Field(0).Type != keyBytesType || t.Field(0).Offset != 0 {
		return nil
	}
	return (*[KeySize]byte)(v.UnsafePointer())
}

// wipeAEAD erases the key copy inside a (see aeadKeyMemory); a is unusable
// afterwards.
func wipeAEAD(a cipher.AEAD) {
	if m := aeadKeyMemory(a); m != nil {
		clear(m[:])
	}
}
