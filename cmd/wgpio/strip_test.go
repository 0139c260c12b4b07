//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestStrip: `wgpio strip` of a gateway file prints what `wg syncconf`
// takes: the interface's private key and port and the peers, without
// Address, MTU or [WGPIO] (wg-quick strip keeps [WGPIO], which wg refuses
// with "Line unrecognized: `[WGPIO]'"); an error names the file's line.
func TestStrip(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "wg0.conf")
	if err := os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\nAddress = 10.8.0.1/24\nMTU = 1420\n\n"+
		"[WGPIO]\nWAN = eth0\nLAN = eth1\n\n[Peer]\nPublicKey = FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM=\nAllowedIPs = 10.8.0.2/32\nEndpoint = 203.0.113.20:51820\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := strip(&out, []string{conf}); err != nil {
		t.Fatal(err)
	}
	want := "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\n\n" +
		"[Peer]\nPublicKey = FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM=\nAllowedIPs = 10.8.0.2/32\nEndpoint = 203.0.113.20:51820\n"
	if out.String() != want {
		t.Errorf("strip printed\n%s\nwant\n%s", out.String(), want)
	}
	// -c FILE, as up and check take the file, is the same.
	out.Reset()
	if err := strip(&out, []string{"-c", conf}); err != nil || out.String() != want {
		t.Errorf("strip -c: %v, printed\n%s\nwant\n%s", err, out.String(), want)
	}
	out.Reset()
	if err := strip(&out, []string{"-c", conf, conf}); err == nil || out.String() != stripFailed+"\n" {
		t.Errorf("strip -c FILE FILE: %v, printed %q, want an error and %q", err, out.String(), stripFailed)
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("[Interface]\nListenPrt = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := strip(&out, []string{bad}); err == nil || !strings.Contains(err.Error(), "bad.conf:2") {
		t.Errorf("strip of a bad file: error %v, want one naming bad.conf:2", err)
	}
}

// TestStripKeepaliveOff: "PersistentKeepalive = 0" (or "off") is printed,
// as `wg-quick strip` prints every line but the wg-quick keys: with `wg
// addconf` it turns a running peer's keepalive off, where a peer without
// the line keeps its own. A peer without the key gets none.
func TestStripKeepaliveOff(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "wg0.conf")
	const (
		pub1 = "FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM="
		pub2 = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0="
		pub3 = "gN65BkIKy1eCE9pP1wdc8ROUtkHLF2PfAqYdyYBz6EA="
	)
	if err := os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n\n"+
		"[Peer]\nPublicKey = "+pub1+"\nPersistentKeepalive = 0\n\n"+
		"[Peer]\nPublicKey = "+pub2+"\nPersistentKeepalive = off\n\n"+
		"[Peer]\nPublicKey = "+pub3+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := strip(&out, []string{conf}); err != nil {
		t.Fatal(err)
	}
	want := "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n\n" +
		"[Peer]\nPublicKey = " + pub1 + "\nPersistentKeepalive = 0\n\n" +
		"[Peer]\nPublicKey = " + pub2 + "\nPersistentKeepalive = 0\n\n" +
		"[Peer]\nPublicKey = " + pub3 + "\n"
	if out.String() != want {
		t.Errorf("strip printed\n%s\nwant\n%s", out.String(), want)
	}
}

// TestStripFailsSafe: whatever makes strip fail (a bad file, a missing
// file, no file named), its standard output is one line wg(8) refuses, so
// that `wg syncconf wg0 <(wgpio strip FILE)` fails and changes nothing;
// the output was empty, and wg took an empty configuration: every peer,
// the private key and the listen port removed from a running gateway.
func TestStripFailsSafe(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n[Peer]\nAllowedIPs 10.8.0.2/32\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{bad}, {filepath.Join(dir, "missing.conf")}, {}, {bad, bad}} {
		var out bytes.Buffer
		if err := strip(&out, args); err == nil {
			t.Fatalf("strip(%q) = nil, want an error", args)
		}
		if out.String() != stripFailed+"\n" {
			t.Errorf("strip(%q) printed %q, want %q", args, out.String(), stripFailed+"\n")
		}
	}
	// wg(8) refuses it before it looks for the interface.
	wg := testenv.Tool(t, "wg", "wireguard-tools")
	f := filepath.Join(dir, "stripped.conf")
	if err := os.WriteFile(f, []byte(stripFailed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wg, "syncconf", "wgpio-nodev0", f).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Line unrecognized") {
		t.Errorf("wg syncconf of strip's failure line: %v, %s; want it refused as unrecognized", err, out)
	}
}
