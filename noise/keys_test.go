package noise_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// RFC 7748 section 6.1: Alice's private and public keys. The base64 forms
// were computed with Python's base64 module.
const (
	aliceHex    = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
	alicePubHex = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
	aliceB64    = "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo="
	alicePubB64 = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
)

func TestKeyKnownAnswers(t *testing.T) {
	k, err := noise.ParsePrivateKeyHex(aliceHex)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := noise.ParsePrivateKey(aliceB64)
	if err != nil || !k.Equal(&k2) {
		t.Fatalf("ParsePrivateKey(%q) = %x, %v; want %s", aliceB64, k2, err, aliceHex)
	}
	pub := k.PublicKey()
	if got := pub.Hex(); got != alicePubHex {
		t.Errorf("PublicKey(alice) = %s, want %s", got, alicePubHex)
	}
	if got := pub.Base64(); got != alicePubB64 {
		t.Errorf("PublicKey(alice).Base64() = %s, want %s", got, alicePubB64)
	}
	if got := k.Base64(); got != aliceB64 {
		t.Errorf("Base64() = %s, want %s", got, aliceB64)
	}
	if got := fmt.Sprint(k); got != "(hidden)" {
		t.Errorf("fmt.Sprint(private key) = %q, want (hidden)", got)
	}
	p2, err := noise.ParsePublicKey(alicePubB64)
	if err != nil || !p2.Equal(&pub) {
		t.Errorf("ParsePublicKey = %v, %v", p2, err)
	}
}

func TestKeyParseErrors(t *testing.T) {
	tests := []struct {
		name string
		f    func(string) error
		in   string
	}{
		{"base64 short", func(s string) error { _, err := noise.ParsePrivateKey(s); return err }, aliceB64[:40]},
		{"base64 long", func(s string) error { _, err := noise.ParsePublicKey(s); return err }, aliceB64 + "AAAA"},
		{"base64 garbage", func(s string) error { _, err := noise.ParsePresharedKey(s); return err }, "!!!!" + aliceB64[4:]},
		// The 43rd character of a 32-byte key carries 4 bits of it and 2
		// that must be zero: "o" (40) is canonical, "p" (41) is the same
		// key with a low bit set, which wg(8) refuses ("Key is not the
		// correct length or format") and Go's lenient decoder took.
		{"base64 non-canonical", func(s string) error { _, err := noise.ParsePrivateKey(s); return err }, aliceB64[:42] + "p="},
		{"base64 newline", func(s string) error { _, err := noise.ParsePublicKey(s); return err }, alicePubB64[:20] + "\n" + alicePubB64[20:]},
		{"base64 no padding", func(s string) error { _, err := noise.ParsePublicKey(s); return err }, alicePubB64[:43]},
		{"hex short", func(s string) error { _, err := noise.ParsePrivateKeyHex(s); return err }, aliceHex[:62]},
		{"hex odd", func(s string) error { _, err := noise.ParsePublicKeyHex(s); return err }, aliceHex[:63] + "g"},
		{"empty", func(s string) error { _, err := noise.ParsePresharedKeyHex(s); return err }, ""},
	}
	for _, tc := range tests {
		if err := tc.f(tc.in); !errors.Is(err, noise.ErrKeyFormat) {
			t.Errorf("%s: parse(%q) = %v, want ErrKeyFormat", tc.name, tc.in, err)
		}
	}
}

func TestKeyZeroAndClamp(t *testing.T) {
	var z noise.PrivateKey
	if !z.IsZero() {
		t.Error("zero PrivateKey IsZero = false")
	}
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if k.IsZero() || k[0]&7 != 0 || k[31]&0x80 != 0 || k[31]&0x40 == 0 {
		t.Errorf("NewPrivateKey not clamped: %x", k)
	}
	k.Zero()
	if !k.IsZero() {
		t.Error("after Zero, IsZero = false")
	}
	var psk noise.PresharedKey
	if !psk.IsZero() || psk.String() != "(hidden)" {
		t.Error("zero PresharedKey")
	}
}
