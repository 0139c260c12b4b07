//go:build linux

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
)

// TestCheckSystemVLANDevice: in shared address mode `wgpio check -system`
// refuses a WANVLAN or LANVLAN whose kernel VLAN device does not exist,
// at its key's line, as the start refuses it (fastgw.resolveSide); it
// said ok, and `wgpio up` with the same file then stopped at "LANVLAN
// 200 on lan0 in shared address mode needs the kernel's VLAN device".
// With the VLAN device there (and its address), it takes the file.
func TestCheckSystemVLANDevice(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cv")
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nWAN = " + wan.A + "\nLAN = " + lan.A +
		"\nLANVLAN = 200\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	dir := t.TempDir()
	err := checkSystemIn(t, a, dir, "novlan", conf)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "LANVLAN" || ce.Line != 7 || !strings.Contains(err.Error(), "needs the kernel's VLAN device") {
		t.Errorf("LANVLAN 200 without %s.200: check -system = %v, want a *config.Error at line 7, key LANVLAN, naming the VLAN device to add", lan.A, err)
	}
	if out, err := a.Run("ip", "link", "add", "link", lan.A, "name", "lv200", "type", "vlan", "id", "200"); err != nil {
		t.Skipf("no kernel VLAN device (module 8021q?): %v\n%s", err, out)
	}
	if err := a.AddAddr("lv200", "198.18.97.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := checkSystemIn(t, a, dir, "vlan", conf); err != nil {
		t.Errorf("LANVLAN 200 with its VLAN device: check -system = %v, want nil", err)
	}
}
