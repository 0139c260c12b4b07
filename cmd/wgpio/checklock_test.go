//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestCheckSystemInterfaceLock: `wgpio check -system` refuses a WAN or
// LAN that another running wgpio gateway holds (the lock lockInstance
// takes per interface), at the interface's key, naming that gateway and
// its pid, as `wgpio up` refuses to start on it; it said ok. Held by a
// gateway of the name checked, it is a warning, as of that gateway's UAPI
// socket: it may be this gateway, already up. Free again, nothing.
func TestCheckSystemInterfaceLock(t *testing.T) {
	testenv.Root(t) // the run directory is root's
	a, wan, lan, priv, peer := checkSystemRig(t, "cl")
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := topo.UniqueName("chkl")
	path := filepath.Join(dir, name+".conf")
	conf := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nWAN = " + wan.A + "\nLAN = " + lan.A +
		"\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// lockInstance and check in the namespace, as two instances of
	// `ip netns exec NS wgpio ...` would run.
	run := func(holder, iface string) (stderr string, err error) {
		t.Helper()
		var out strings.Builder
		if derr := a.Do(func() error {
			if holder != "" {
				release, lerr := lockInstance(holder, []string{iface})
				if lerr != nil {
					return lerr
				}
				defer release()
			}
			err = check(&strings.Builder{}, &out, []string{"-system", "-c", path})
			return nil
		}); derr != nil {
			t.Fatal(derr)
		}
		return out.String(), err
	}
	other := topo.UniqueName("chko")
	for _, x := range []struct {
		key, iface string
		line       int
	}{{"WAN", wan.A, 5}, {"LAN", lan.A, 6}} {
		_, err := run(other, x.iface)
		want := fmt.Sprintf("another wgpio (gateway %s, pid %d) already runs with interface %s", other, os.Getpid(), x.iface)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != x.key || ce.Line != x.line || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %s held by gateway %s: check -system = %v, want a *config.Error at line %d, key %s, %q", x.key, x.iface, other, err, x.line, x.key, want)
		}
	}
	stderr, err := run(name, lan.A)
	if want := "already runs with interface " + lan.A; err != nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "unless that is this gateway, already up") {
		t.Errorf("LAN held by the gateway %s itself: check -system = %v, stderr %q, want nil and a warning %q", name, err, stderr, want)
	}
	if stderr, err := run("", ""); err != nil || strings.Contains(stderr, "already runs") {
		t.Errorf("interfaces free: check -system = %v, stderr %q, want nil and no warning of a lock", err, stderr)
	}
}
