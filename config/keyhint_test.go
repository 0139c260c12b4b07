package config

import (
	"strings"
	"testing"
)

// TestKeyQuotedOrStrayHint: a key in quotes, or with a stray character,
// is told so, not that it is the name of a file because base64 has '/'
// (priv1 has), and never echoed.
func TestKeyQuotedOrStrayHint(t *testing.T) {
	const quoted = ` (without the quotes around it: wg(8) and wg-quick read a value as it stands, quotes included)`
	stray := func(n string) string {
		return " (" + n + " of its characters are not base64's, letters, digits, '+', '/' and '=' padding: copy the key as `wg genkey`, `wg pubkey` and `wg genpsk` print it)"
	}
	const bad = `wg0.conf:2: key "PrivateKey": not a base64 32-byte key`
	if !strings.Contains(priv1, "/") {
		t.Fatalf("priv1 %q has no '/': the test needs one", priv1)
	}
	for _, tc := range []struct{ value, want string }{
		{`"` + priv1 + `"`, bad + quoted},
		{`'` + priv1 + `'`, bad + quoted},
		{priv1 + ".", bad + stray("1")},
		{priv1[:10] + "\u00a0" + priv1[10:], bad + stray("1")},
		{priv1[:43] + "!", bad + stray("1")},
		// Paths stay paths.
		{"/etc/wgpio/private.key", bad + ` (the key itself goes here, as ` + "`wg genkey`" + ` prints it, not the name of a file holding it)`},
		{"/etc/wgpio/keys/gateway-0123456789abcdef.key", bad + ` (the key itself goes here, as ` + "`wg genkey`" + ` prints it, not the name of a file holding it)`},
	} {
		_, err := parseString("[Interface]\nPrivateKey = " + tc.value + "\n")
		if err == nil || err.Error() != tc.want {
			t.Errorf("PrivateKey = %s: %v, want %q", tc.value, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), priv1[:20]) {
			t.Errorf("PrivateKey = %s: the error %q holds the private key", tc.value, err)
		}
	}
}
