//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeForwarding points forwardingOff at a directory holding the two
// forwarding sysctls with the values given ("0" or "1"), for the test's
// duration.
func fakeForwarding(t *testing.T, v4, v6 string) {
	t.Helper()
	dir := t.TempDir()
	old := procSys
	procSys = dir + "/"
	t.Cleanup(func() { procSys = old })
	for key, v := range map[string]string{"net.ipv4.ip_forward": v4, "net.ipv6.conf.all.forwarding": v6} {
		p := filepath.Join(dir, strings.ReplaceAll(key, ".", "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckSystemForwarding: `wgpio check -system` refuses a compat-mqtun
// file while forwarding is off for a family its peers use, as up refuses
// to start it, and warns of it for a fast-path gateway with an Address in
// shared mode, as up warns at start. Before, check -system said ok of
// both, and `wgpio up -mode compat-mqtun` then stopped at once with
// "compat-mqtun forwards through the kernel, and forwarding is off".
func TestCheckSystemForwarding(t *testing.T) {
	priv, peer := newPrivateKey(t), newPrivateKey(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	head := "[Interface]\nPrivateKey = " + priv.Base64() + "\nAddress = 198.19.99.1/24\n"
	peers := "[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.19.99.2/32\n"
	mqtun := write("mqtun", head+"[WGPIO]\nMode = compat-mqtun\n"+peers)
	// Interfaces that do not exist: systemWarnings reads none of them.
	fast, err := loadConfig(write("fast", head+"[WGPIO]\nMode = fastpath\nWAN = h39nowan0\nLAN = h39nolan0\n"+peers))
	if err != nil {
		t.Fatal(err)
	}

	fakeForwarding(t, "0", "0")
	var stderr strings.Builder
	err = check(&strings.Builder{}, &stderr, []string{"-system", "-c", mqtun})
	if err == nil || !strings.Contains(err.Error(), "sysctl -w net.ipv4.ip_forward=1") || !strings.Contains(err.Error(), "mqtun.conf:5") {
		t.Errorf("compat-mqtun, forwarding off: check -system = %v, want the start's error at the Mode line naming the sysctl", err)
	}
	// Mode from the flag: the error names it, as check's (it said "up:
	// -mode: ...", as if up had run).
	const want = "check: -mode: compat-mqtun forwards through the kernel"
	if err := check(&strings.Builder{}, &stderr, []string{"-system", "-mode", "compat-mqtun", "-c", write("flag", head+peers)}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("-mode compat-mqtun, forwarding off: check -system = %v, want %q...", err, want)
	}
	if w := systemWarnings(fast, fast.WGPIO, "fast"); !strings.Contains(strings.Join(w, "\n"), "sysctl -w net.ipv4.ip_forward=1") {
		t.Errorf("fastpath with Address, forwarding off: check -system warnings %q, want up's forwarding warning", w)
	}

	fakeForwarding(t, "1", "0")
	stderr.Reset()
	var stdout strings.Builder
	if err := check(&stdout, &stderr, []string{"-system", "-c", mqtun}); err != nil {
		t.Errorf("compat-mqtun, IPv4 forwarding on, IPv4 peers only: check -system = %v, want nil", err)
	}
	// compat-mqtun runs on no WAN or LAN: the ok line says what -system
	// checked (it claimed "this namespace's interfaces").
	if got := stdout.String(); strings.Contains(got, "interfaces") || !strings.Contains(got, "forwarding sysctls, TUN name and held ports") {
		t.Errorf("compat-mqtun: check -system printed %q, want it to name what it checked, without interfaces", got)
	}
	if w := systemWarnings(fast, fast.WGPIO, "fast"); strings.Contains(strings.Join(w, "\n"), "forwarding") {
		t.Errorf("fastpath, IPv4 forwarding on: check -system warnings %q, want none of forwarding", w)
	}
}

// TestCheckSystemErrorWarns: `wgpio check -system -mode compat-mqtun`
// with forwarding off gives the keys that Mode ignores (WAN, LAN) with
// its error, as plain check and up give them; it printed the error alone.
func TestCheckSystemErrorWarns(t *testing.T) {
	priv, peer := newPrivateKey(t), newPrivateKey(t)
	path := filepath.Join(t.TempDir(), "gw.conf")
	conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\n[WGPIO]\nWAN = h51nowan0\nLAN = h51nolan0\n" +
		"[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.19.99.2/32\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fakeForwarding(t, "0", "0")
	var stderr strings.Builder
	err := check(&strings.Builder{}, &stderr, []string{"-system", "-mode", "compat-mqtun", "-c", path})
	if err == nil || !strings.Contains(err.Error(), "compat-mqtun forwards through the kernel") {
		t.Fatalf("-mode compat-mqtun, forwarding off: check -system = %v, want the forwarding error", err)
	}
	for _, want := range []string{
		`gw.conf:4: key "WAN": ignored in Mode = compat-mqtun`,
		`gw.conf:5: key "LAN": ignored in Mode = compat-mqtun`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-mode compat-mqtun, forwarding off: check -system's stderr %q, want a warning %q with the error", stderr.String(), want)
		}
	}
}
