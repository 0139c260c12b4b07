package config

import (
	"strings"
	"testing"
)

// TestNoSecretsInErrors: a private or pre-shared key that fails to parse, or
// sits in the wrong place, never appears in a message.
func TestNoSecretsInErrors(t *testing.T) {
	badPriv := priv2[:43] + "!" // one bad character
	text := "[Interface]\nPrivateKey = " + badPriv + "\nListenPort = " + priv3 + "\n" +
		"[Peer]\nPublicKey = " + pub2 + "\nPresharedKey = " + psk[:42] + "\n" +
		// A key pasted between brackets is a section header whose
		// name the error shows: it showed 40 of the key's 44
		// characters.
		"[" + priv1 + "]\n"
	_, err := parseString(text)
	if err == nil {
		t.Fatal("Parse = nil error, want errors")
	}
	for _, secret := range []string{badPriv[:40], priv3[:40], psk[:40], priv1[:40]} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Parse error %q contains a secret %q", err, secret)
		}
	}
}

// TestUnknownSectionHidesKey: an unknown section's error names it, but
// as "(a key)" when it holds a key, as quoteShort hides one elsewhere.
func TestUnknownSectionHidesKey(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"[PrivateKey = " + priv2 + "]", `wg0.conf:3: unknown section [(a key)]; want [Interface], [Peer] or [WGPIO]`},
		{"[" + priv2 + "]", `wg0.conf:3: unknown section [(a key)]; want [Interface], [Peer] or [WGPIO]`},
		{"[Peers]", `wg0.conf:3: unknown section [Peers]; want [Interface], [Peer] or [WGPIO]`},
		{"[WGPIO settings]", `wg0.conf:3: unknown section [WGPIO settings]; want [Interface], [Peer] or [WGPIO]`},
		// A key cut short, or with a stray character in it, is no
		// run of 43 base64 characters: cut to 40 bytes, most of it
		// was shown.
		{"[" + priv2[:41] + "]", `wg0.conf:3: unknown section [(not shown: not a plain name, and it may hold a key)]; want [Interface], [Peer] or [WGPIO]`},
		{"[" + priv2[:20] + "\u00a0" + priv2[20:] + "]", `wg0.conf:3: unknown section [(not shown: not a plain name, and it may hold a key)]; want [Interface], [Peer] or [WGPIO]`},
	} {
		_, err := parseString(iface + tt.header + "\n")
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) error = %v, want %s", tt.header, err, tt.want)
		}
	}
}
