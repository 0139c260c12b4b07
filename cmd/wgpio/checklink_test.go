//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
)

// TestCheckSystemNotEthernet: `wgpio check -system` refuses a WAN that is
// not an Ethernet interface (the loopback), at the WAN line, in both
// modes, as their starts refuse it; in Mode = compat it said ok.
func TestCheckSystemNotEthernet(t *testing.T) {
	a, _, lan, priv, peer := checkSystemRig(t, "ce")
	if out, err := a.Run("ip", "addr", "add", "198.18.98.1/24", "dev", "lo"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, mode := range []string{"fastpath", "compat"} {
		conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nMode = " + mode + "\nWAN = lo\nLAN = " + lan.A +
			"\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
		err := checkSystemIn(t, a, dir, "lo-"+mode, conf)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != "WAN" || ce.Line != 6 || !strings.Contains(err.Error(), "not an Ethernet interface") {
			t.Errorf("Mode = %s, WAN = lo: check -system = %v, want a *config.Error at line 6, key WAN, \"not an Ethernet interface\"", mode, err)
		}
	}
}

// TestCheckSystemTUNName: a gateway name that an interface other than a
// TUN has (here the LAN's veth) is refused by `wgpio check -system`
// (and by up before it opens anything) where the gateway makes a TUN of
// that name: fast path with an Address, compat-mqtun. The start failed
// at the TUN, after opening its ports, and check said ok. Without an
// Address the fast path makes no TUN, and the name is free to take.
func TestCheckSystemTUNName(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cn")
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	fakeForwarding(t, "1", "1")
	dir := t.TempDir()
	conf := func(mode, addr string) string {
		return "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n" + addr + "[WGPIO]\nMode = " + mode + "\nWAN = " + wan.A + "\nLAN = " + lan.A +
			"\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	}
	for _, tc := range []struct {
		mode, addr string
		refused    bool
	}{
		{"fastpath", "Address = 198.18.97.1/24\n", true},
		{"compat-mqtun", "", true},
		{"fastpath", "", false},
	} {
		path := filepath.Join(dir, tc.mode+".conf")
		if err := os.WriteFile(path, []byte(conf(tc.mode, tc.addr)), 0o600); err != nil {
			t.Fatal(err)
		}
		var cerr error
		if err := a.Do(func() error {
			cerr = check(&strings.Builder{}, &strings.Builder{}, []string{"-system", "-name", lan.A, "-c", path})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		refused := cerr != nil && strings.Contains(cerr.Error(), "makes a TUN named "+lan.A+", but an interface of that name, of type veth")
		if refused != tc.refused {
			t.Errorf("Mode = %s %q, -name %s (a veth): check -system = %v; refused for the name %v, want %v", tc.mode, tc.addr, lan.A, cerr, refused, tc.refused)
		}
	}
}
