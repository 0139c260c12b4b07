//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestCheckSystemLANAddress: `wgpio check -system` gives the warning up
// logs at start for a LAN without an IPv4 or global IPv6 address in
// shared address mode ("LAN has no IPv4 or global IPv6 address", in
// either mode's words), at the LAN line, naming the interface and the
// fix; it said ok without a word. With an address on the LAN, none.
func TestCheckSystemLANAddress(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "ca")
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(mode string) (string, error) {
		t.Helper()
		return checkSystemOut(t, a, dir, mode, "[Interface]\nPrivateKey = "+priv.Base64()+"\nListenPort = 51820\n[WGPIO]\nMode = "+mode+"\nWAN = "+wan.A+"\nLAN = "+lan.A+
			"\n[Peer]\nPublicKey = "+peer.PublicKey().Base64()+"\nAllowedIPs = 198.18.99.0/24\n")
	}
	for _, mode := range []string{"fastpath", "compat"} {
		stderr, err := run(mode)
		want := mode + `.conf:7: key "LAN": ` + lan.A + ": LAN has no IPv4 or global IPv6 address"
		if err != nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "ip addr add ADDRESS/PREFIX dev "+lan.A) {
			t.Errorf("Mode = %s, LAN without an address: check -system = %v, stderr %q, want nil and a warning %q… with the fix", mode, err, stderr, want)
		}
	}
	if err := a.AddAddr(lan.A, "198.18.97.1/24"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"fastpath", "compat"} {
		if stderr, err := run(mode); err != nil || strings.Contains(stderr, "LAN has no") {
			t.Errorf("Mode = %s, LAN with an address: check -system = %v, stderr %q, want nil and no warning of its address", mode, err, stderr)
		}
	}
}
