//go:build linux

package main

import (
	"errors"
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
