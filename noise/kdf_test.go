package noise

import (
	"crypto/hmac"
	"crypto/rand"
	"hash"
	"testing"

	"golang.org/x/crypto/blake2s"
	"golang.zx2c4.com/wireguard/device"
)

// TestKDFAgainstWireGuardGo cross-checks our HKDF with wireguard-go's
// exported KDF1/KDF2/KDF3 over random keys and inputs of the lengths the
// handshake uses.
func TestKDFAgainstWireGuardGo(t *testing.T) {
	for _, n := range []int{0, 1, 16, 32, 33, 64, 65, 200} {
		key := make([]byte, 32)
		in := make([]byte, n)
		rand.Read(key)
		rand.Read(in)
		var a0, a1, a2, b0, b1, b2 [32]byte
		kdf1(&a0, key, in)
		device.KDF1(&b0, key, in)
		if a0 != b0 {
			t.Errorf("kdf1(len %d) = %x, want %x", n, a0, b0)
		}
		kdf2(&a0, &a1, key, in)
		device.KDF2(&b0, &b1, key, in)
		if a0 != b0 || a1 != b1 {
			t.Errorf("kdf2(len %d) = %x %x, want %x %x", n, a0, a1, b0, b1)
		}
		kdf3(&a0, &a1, &a2, key, in)
		device.KDF3(&b0, &b1, &b2, key, in)
		if a0 != b0 || a1 != b1 || a2 != b2 {
			t.Errorf("kdf3(len %d) differs from wireguard-go", n)
		}
	}
}

// TestHMACSlowReference checks both HMAC paths against crypto/hmac over
// BLAKE2s, the slow obvious reference.
func TestHMACSlowReference(t *testing.T) {
	for _, kl := range []int{0, 32, 64, 65} {
		for _, n := range []int{0, 1, 33, 64, 65, 300} {
			key := make([]byte, kl)
			in := make([]byte, n)
			rand.Read(key)
			rand.Read(in)
			m := hmac.New(func() hash.Hash { h, _ := blake2s.New256(nil); return h }, key)
			m.Write(in)
			want := m.Sum(nil)
			var got [32]byte
			hmac2(&got, key, in[:n/2], in[n/2:])
			if string(got[:]) != string(want) {
				t.Errorf("hmac2(key %d, in %d) = %x, want %x", kl, n, got, want)
			}
		}
	}
}

func TestInitialState(t *testing.T) {
	// wireguard-go exports its precomputed initial chaining key and hash.
	if initialChainKey != device.InitialChainKey || initialHash != device.InitialHash {
		t.Errorf("initial chaining key/hash = %x %x, want %x %x", initialChainKey, initialHash, device.InitialChainKey, device.InitialHash)
	}
}

func TestKDFNoAllocs(t *testing.T) {
	var ck, k, tau [32]byte
	in := make([]byte, 32)
	if n := testing.AllocsPerRun(100, func() {
		kdf1(&ck, ck[:], in)
		kdf3(&ck, &tau, &k, ck[:], in)
		mixHash(&ck, &ck, in)
	}); n != 0 {
		t.Errorf("kdf1+kdf3+mixHash allocs = %v, want 0", n)
	}
}
