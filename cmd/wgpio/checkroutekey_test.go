//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/topo"
)

// TestCheckSystemRouteKey: `wgpio check -system` warns of an allowed-IPs
// prefix whose route key a route of the host's holds already (here the
// LAN's own subnet, and a static IPv6 route of the default metric), as
// the start does when its route into the exception TUN meets it (the
// host's route stays: its packets to the prefix do not take the tunnel;
// wg-quick up refuses such a prefix); it said ok. A prefix no route of
// that key holds (an IPv6 subnet's kernel route has metric 256), or a
// gateway without an Address (no exception TUN), gives none.
func TestCheckSystemRouteKey(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "ck")
	for _, x := range [][2]string{{wan.A, "198.18.98.1/24"}, {lan.A, "198.18.97.1/24"}, {lan.A, "2001:2:97::1/64"}} {
		if err := a.AddAddr(x[0], x[1]); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := a.Run("ip", "-6", "route", "add", "2001:2:98::/64", "dev", lan.A); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	dir := t.TempDir()
	run := func(address, mode string) string {
		t.Helper()
		stderr, err := checkSystemOut(t, a, dir, "gw", "[Interface]\nPrivateKey = "+priv.Base64()+"\nListenPort = 51820\n"+address+"[WGPIO]\n"+mode+"WAN = "+wan.A+"\nLAN = "+lan.A+
			"\n[Peer]\nPublicKey = "+peer.PublicKey().Base64()+"\nAllowedIPs = 198.18.99.0/24, 198.18.97.0/24, 2001:2:97::/64, 2001:2:98::/64, 0.0.0.0/0\n")
		if err != nil {
			t.Fatalf("check -system = %v, want a warning, not an error", err)
		}
		return stderr
	}
	stderr := run("Address = 198.19.0.1/24\n", "")
	for _, want := range []string{`gw.conf:8: key "AllowedIPs": 198.18.97.0/24 is the key of a route of the host's`, `gw.conf:8: key "AllowedIPs": 2001:2:98::/64 is the key of a route of the host's`, "wg-quick up refuses such a prefix"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, not := range []string{"198.18.99.0/24 is the key", "2001:2:97::/64 is the key", "0.0.0.0/0 is the key"} {
		if strings.Contains(stderr, not) {
			t.Errorf("stderr has %q:\n%s", not, stderr)
		}
	}
	if stderr := run("", ""); strings.Contains(stderr, "is the key of a route") {
		t.Errorf("without an Address (no exception TUN): %s", stderr)
	}
	if out, err := a.Run("sysctl", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if stderr := run("", "Mode = compat-mqtun\n"); !strings.Contains(stderr, "198.18.97.0/24 is the key of a route") {
		t.Errorf("Mode = compat-mqtun (its TUN takes the routes): no warning of 198.18.97.0/24:\n%s", stderr)
	}
}

// TestCheckSystemRouteKeyRunning: `wgpio check -system` beside the
// running gateway of its file (the README's advice before a reload) does
// not take that gateway's own routes into its TUN for the host's: it
// warned of every allowed-IPs prefix as "the key of a route of the
// host's ... none is made into the gateway's TUN", where those routes are
// the TUN's and go with the gateway. A host's route of another prefix is
// still warned of. The running gateway is its name lock held and its TUN
// (a persistent one here, which checkTUNName accepts while the lock is
// held).
func TestCheckSystemRouteKeyRunning(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "ckr")
	for _, x := range [][2]string{{wan.A, "198.18.98.1/24"}, {lan.A, "198.18.97.1/24"}} {
		if err := a.AddAddr(x[0], x[1]); err != nil {
			t.Fatal(err)
		}
	}
	name := topo.UniqueName("ckr")
	release, err := lockInstance(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, args := range [][]string{
		{"ip", "tuntap", "add", "dev", name, "mode", "tun"},
		{"ip", "link", "set", name, "up"},
		{"ip", "route", "add", "198.18.99.0/24", "dev", name},
		{"ip", "-6", "route", "add", "2001:2:99::/64", "dev", name},
	} {
		if out, err := a.Run(args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	stderr, err := checkSystemOut(t, a, t.TempDir(), name, "[Interface]\nPrivateKey = "+priv.Base64()+"\nListenPort = 51820\nAddress = 198.19.0.1/24\n[WGPIO]\nWAN = "+wan.A+"\nLAN = "+lan.A+
		"\n[Peer]\nPublicKey = "+peer.PublicKey().Base64()+"\nAllowedIPs = 198.18.99.0/24, 2001:2:99::/64, 198.18.97.0/24\n")
	if err != nil {
		t.Fatalf("check -system = %v, want warnings only", err)
	}
	for _, not := range []string{"198.18.99.0/24 is the key", "2001:2:99::/64 is the key"} {
		if strings.Contains(stderr, not) {
			t.Errorf("the running gateway's own route warned of as the host's (%q):\n%s", not, stderr)
		}
	}
	if !strings.Contains(stderr, "198.18.97.0/24 is the key of a route of the host's") {
		t.Errorf("the LAN's subnet route not warned of:\n%s", stderr)
	}
}
