package chachapoly

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestWipeAEAD checks that this package knows the layout of x/crypto's
// AEAD (a new x/crypto that changes it fails here, not silently), and that
// Key.Zero and Key.Set erase the key copy inside it: the AEAD then seals
// as one made from the zero key does.
func TestWipeAEAD(t *testing.T) {
	var key [KeySize]byte
	for i := range key {
		key[i] = byte(i + 1)
	}
	a := newAEAD(&key)
	m := aeadKeyMemory(a)
	if m == nil {
		t.Fatalf("x/crypto's AEAD (%T) no longer has the layout wipeAEAD erases", a)
	}
	if *m != key {
		t.Fatalf("key memory of the AEAD holds %x, want the key %x", m[:], key[:])
	}
	zero := newAEAD(&[KeySize]byte{})
	nonce := make([]byte, 12)
	msg := []byte("sixty-four bytes of a WireGuard transport message, more or less.")
	sealedZero := zero.Seal(nil, nonce, msg, nil)

	for _, im := range supported() {
		t.Run(im.String(), func(t *testing.T) {
			setImpl(t, im)
			for _, erase := range []string{"Zero", "Set"} {
				var k Key
				k.Set(&key)
				a := k.aead
				if a == nil {
					if im == implGeneric || im == implAVX2 {
						t.Fatalf("Set under %v made no x/crypto AEAD", im)
					}
					return // nothing of x/crypto's to erase
				}
				if erase == "Zero" {
					k.Zero()
				} else {
					k.Set(&[KeySize]byte{9})
				}
				if got := a.Seal(nil, nonce, msg, nil); !bytes.Equal(got, sealedZero) {
					t.Errorf("after Key.%s the old x/crypto AEAD still seals with the key", erase)
				}
				if k.aead == a {
					t.Errorf("after Key.%s the Key still holds the old AEAD", erase)
				}
			}
		})
	}
}

// TestKeyWordsFirst: a Key's 32 bytes of key words open it, and its AEAD
// pointer follows; fastpath lays a Keypair's send line out on it (the
// words end that line, TestKeypairLayout there).
func TestKeyWordsFirst(t *testing.T) {
	var k Key
	if off := unsafe.Offsetof(k.w); off != 0 || unsafe.Sizeof(k.w) != 32 {
		t.Errorf("Key.w at byte %d, %d bytes; fastpath's Keypair layout needs it at 0, 32 bytes", off, unsafe.Sizeof(k.w))
	}
}
