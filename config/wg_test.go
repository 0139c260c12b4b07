package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestWG: WG writes only keys wg(8) takes (no Address, MTU or [WGPIO],
// which make `wg syncconf` fail with "Line unrecognized"), and what it
// writes parses back to the file's keys and peers. (wg(8) parses a
// configuration only to set a device, so the keys are checked against its
// list.)
func TestWG(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		t.Fatal(err)
	}
	f.Interface.Unused = append(f.Interface.Unused, Setting{Key: "FwMark", Value: "0x51820"}, Setting{Key: "PostUp", Value: "true"})
	out := string(f.WG())
	wgKeys := map[string]bool{"PrivateKey": true, "ListenPort": true, "FwMark": true, "PublicKey": true, "PresharedKey": true,
		"AllowedIPs": true, "Endpoint": true, "PersistentKeepalive": true}
	for _, line := range strings.Split(out, "\n") {
		if line == "" || line == "[Interface]" || line == "[Peer]" {
			continue
		}
		k, _, ok := strings.Cut(line, " = ")
		if !ok || !wgKeys[k] {
			t.Errorf("line %q: not a wg(8) key", line)
		}
	}
	if !strings.Contains(out, "FwMark = 0x51820\n") {
		t.Errorf("FwMark left out:\n%s", out)
	}
	g, err := Parse("stripped", strings.NewReader(out))
	if err != nil {
		t.Fatalf("WG output does not parse: %v\n%s", err, out)
	}
	if g.Interface.PrivateKey != f.Interface.PrivateKey || g.Interface.ListenPort != f.Interface.ListenPort {
		t.Errorf("interface keys differ after WG")
	}
	if d := cmp.Diff(f.Peers, g.Peers, append(fileCmp, cmpopts.IgnoreFields(Peer{}, "Line", "EndpointHost"))...); d != "" {
		t.Errorf("peers differ after WG (-file +stripped):\n%s", d)
	}
	if !g.WGPIO.isZero() || len(g.Interface.Addresses) != 0 || g.Interface.MTU != 0 {
		t.Errorf("WG output keeps wg-quick or [WGPIO] keys:\n%s", out)
	}
}
