//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestCheckSystemHeld: `wgpio check -system` warns of a UAPI socket of
// the gateway's name that answers (a wireguard-go or another wgpio of
// that name, maybe of another namespace) and of a MetricsAddress another
// socket holds, both of which `wgpio up` refuses to start on; it said ok
// without a word. Warnings, as of a held ListenPort: the holder may be
// the gateway itself.
func TestCheckSystemHeld(t *testing.T) {
	testenv.Root(t) // the UAPI directory is root's
	fakeForwarding(t, "1", "1")
	priv, peer := newPrivateKey(t), newPrivateKey(t)
	var b [4]byte
	rand.Read(b[:])
	name := "chk" + hex.EncodeToString(b[:]) // 11 bytes: an interface name
	if err := os.MkdirAll(uapiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(uapiDir, name+".sock")
	uapi, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uapi.Close(); os.Remove(sock) })
	metrics, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer metrics.Close()
	path := filepath.Join(t.TempDir(), name+".conf")
	conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nMode = compat-mqtun\nMetricsAddress = " + metrics.Addr().String() +
		"\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if err := check(&strings.Builder{}, &stderr, []string{"-system", "-c", path}); err != nil {
		t.Fatalf("check -system: %v, want nil (warnings only)", err)
	}
	for _, want := range []string{
		"a WireGuard interface named " + name + " already answers on " + sock,
		`key "MetricsAddress": cannot serve metrics on ` + metrics.Addr().String(),
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("check -system with the UAPI socket and the metrics port held: stderr %q, want a warning %q", stderr.String(), want)
		}
	}
	// The address from the flag: the warning names it as check's flag
	// (it said "up: -metrics-addr: ...").
	stderr.Reset()
	if err := check(&strings.Builder{}, &stderr, []string{"-system", "-metrics-addr", metrics.Addr().String(), "-c", path}); err != nil {
		t.Fatalf("check -system -metrics-addr: %v, want nil (warnings only)", err)
	}
	if want := "wgpio: warning: check: -metrics-addr: cannot serve metrics on " + metrics.Addr().String(); !strings.Contains(stderr.String(), want) {
		t.Errorf("check -system -metrics-addr with the port held: stderr %q, want a warning %q", stderr.String(), want)
	}
	// Named otherwise (up -name, as dist/wgpio.service starts it), the
	// gateway does not need that socket; given the held name, it does.
	other := filepath.Join(filepath.Dir(path), "x.conf")
	if err := os.WriteFile(other, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-system", "-name", "chkother0", "-c", path}, false},
		{[]string{"-system", "-name", name, "-c", other}, true},
	} {
		stderr.Reset()
		if err := check(&strings.Builder{}, &stderr, tc.args); err != nil {
			t.Fatalf("check %v: %v, want nil", tc.args, err)
		}
		if got := strings.Contains(stderr.String(), "already answers"); got != tc.warn {
			t.Errorf("check %v: stderr %q; warning of the UAPI socket %v, want %v", tc.args, stderr.String(), got, tc.warn)
		}
	}
	uapi.Close()
	metrics.Close()
	stderr.Reset()
	if err := check(&strings.Builder{}, &stderr, []string{"-system", "-c", path}); err != nil || strings.Contains(stderr.String(), "already answers") || strings.Contains(stderr.String(), "MetricsAddress") {
		t.Errorf("check -system with both free: %v, stderr %q, want nil and no warning of them", err, stderr.String())
	}
}
