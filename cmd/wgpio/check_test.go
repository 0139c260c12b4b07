//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// TestCheck: `wgpio check -c FILE` takes a file up and a reload would
// take (exit 0, "ok"), with the warnings up logs (a key wgpio does not
// act on, a key the Mode ignores) on stderr, and refuses one they would
// refuse with the file, line and key (the error main prints, exit 1).
func TestCheck(t *testing.T) {
	priv, peer := newPrivateKey(t), newPrivateKey(t)
	pub := peer.PublicKey()
	head := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n"
	peers := "[Peer]\nPublicKey = " + pub.Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text     string
		mode           os.FileMode // 0: 0600
		stdout, stderr string      // substrings wanted ("" none)
		err            string      // substring of the error; "" none
		flags          []string    // check's flags besides -c
	}{
		{name: "good", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			stdout: ": ok (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n"},
		{name: "warnings", text: head + "DNS = 198.18.0.53\n[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\nCPUs = 0\n" + peers,
			stdout: ": ok, with 2 warnings above (Mode = compat, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `warnings.conf:9: key "CPUs": ignored in Mode = compat`},
		// up warns of a file every user may read (it holds the private
		// key), as wg-quick does; check said nothing of it.
		{name: "world-writable", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, mode: 0o602,
			stdout: ": ok, with 1 warning above (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n", stderr: "it is world writable too: any user may add peers"},
		{name: "world-readable", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, mode: 0o644,
			stdout: ": ok, with 1 warning above (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n", stderr: "world-readable.conf: the configuration file is world accessible, and it holds the private key (mode 0644); fix: chmod o-rwx "},
		// A file name a shell splits: quoted in the fix, as in the
		// name's own warning (`wgpio up -c` pasted as printed named
		// two files).
		{name: "world read", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, mode: 0o644,
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n",
			stderr: "(mode 0644); fix: chmod o-rwx 'DIR/world read.conf'"},
		// Warnings in the file's order: the parser's (DNS, line 4) and
		// the Mode's (CPUs, line 9, listed after ReplayWindow, line 10) interleaved
		// by line, where the parser's came first.
		{name: "warning-order", text: head + "DNS = 198.18.0.53\n[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\nCPUs = 0\nReplayWindow = auto\n" + peers,
			stdout: ": ok, with 3 warnings above (Mode = compat, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `warning-order.conf:4: key "DNS"`},
		// up refuses a gateway name (the file's, by default) that
		// cannot name an interface; check said ok without a word. The
		// warning says that up without -name refuses it, and what to
		// pass (it said "start it with -name", and not that up fails).
		{name: "site-frankfurt-01", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `wgpio up names the gateway after the file, "site-frankfurt-01", which cannot name an interface ` +
				"(1 to 15 bytes, no '/', ':' or white space), so `wgpio up -c DIR/site-frankfurt-01.conf` without -name refuses to start: give it -name NAME, or rename the file"},
		{name: "h35%d", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `wgpio up names the gateway after the file, "h35%d", which cannot name an interface`},
		{name: "typo", text: head + "ListenPrt = 1\n" + peers,
			err: `typo.conf:4: key "ListenPrt": unknown key in [Interface]; did you mean "ListenPort"?`},
		// up refuses a range that does not start at the ListenPort, a
		// check of the file alone; check said ok.
		{name: "sourceports", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\nSourcePorts = 51821-51824\n" + peers,
			err: `sourceports.conf:7: key "SourcePorts": must start at the ListenPort 51820`},
		{name: "sourceports-compat", text: head + "[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\nSourcePorts = 51821-51824\n" + peers,
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = compat, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `key "SourcePorts": ignored in Mode = compat`},
		// Refused by up before it opens anything, for what the file
		// alone says; check said ok.
		{name: "no-wan", text: head + peers,
			err: `no-wan.conf: fast-path mode needs WAN and LAN in the [WGPIO] section`},
		{name: "wan-is-lan", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth0\n" + peers,
			err: `wan-is-lan.conf:6: key "LAN": "eth0" is the WAN interface too`},
		{name: "compat-wan-is-lan", text: head + "[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth0\n" + peers,
			err: `compat-wan-is-lan.conf:7: key "LAN": "eth0" is the WAN interface too`},
		{name: "compat-no-lan", text: head + "[WGPIO]\nMode = compat\nWAN = eth0\n" + peers,
			err: `compat-no-lan.conf: compat mode needs WAN and LAN in the [WGPIO] section`},
		{name: "compat-owned", text: head + "[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\nAddressMode = owned\nWANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\n" + peers,
			err: `compat-owned.conf:8: key "AddressMode": owned is not available in Mode = compat`},
		{name: "compat-no-port", text: "[Interface]\nPrivateKey = " + priv.Base64() + "\n[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\n" + peers,
			err: `compat-no-port.conf: key "ListenPort": missing from [Interface]; Mode = compat needs one`},
		// A tunnel MTU whose WAN frames no AF_XDP frame holds, whatever
		// the WAN (up refuses it at start); check said ok. With the
		// WAN's tag, 4 bytes less fit; compat-mqtun sends through the
		// kernel and takes it.
		{name: "mtu-frame", text: head + "MTU = 3763\n[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			err: `mtu-frame.conf:4: key "MTU": tunnel MTU 3763 makes WAN frames of 3837 bytes (60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: full-size tunnel packets to IPv4 peers could never be sent; lower MTU in [Interface] to 3762`},
		// The fast path's floor: check said ok, the start stopped.
		{name: "mtu-floor", text: head + "MTU = 575\n[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			err: `mtu-floor.conf:4: key "MTU": 575 is below the fast path's minimum, 576`},
		{name: "mtu-floor-compat", text: head + "MTU = 575\n[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\n" + peers,
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = compat, 1 peer; the file only: -system checks the interfaces too)\n"},
		// compat-mqtun's TUN under 1280 bytes takes no IPv6 route:
		// the warning says the start stops there, and the summary
		// said "ok, with 1 warning above" of it.
		{name: "mqtun-mtu-v6", text: head + "MTU = 1200\nAddress = 198.19.0.1/24\n[WGPIO]\nMode = compat-mqtun\n" +
			"[Peer]\nPublicKey = " + pub.Base64() + "\nAllowedIPs = 198.18.99.0/24, 2001:db8:99::/64\n",
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = compat-mqtun, 1 peer; the file only: -system checks the interfaces too)\n",
			stderr: "which stops wgpio up"},
		{name: "mtu-frame-fits", text: head + "MTU = 3762\n[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			stdout: ": ok (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n"},
		{name: "mtu-frame-vlan", text: head + "MTU = 3762\n[WGPIO]\nWAN = eth0\nLAN = eth1\nWANVLAN = 7\nAddressMode = owned\nWANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\n" + peers,
			err: `key "MTU": tunnel MTU 3762 makes WAN frames of 3840 bytes`},
		{name: "mtu-frame-compat", text: head + "MTU = 9000\n[WGPIO]\nMode = compat\nWAN = eth0\nLAN = eth1\n" + peers,
			err: `mtu-frame-compat.conf:4: key "MTU": tunnel MTU 9000 makes WAN frames`},
		{name: "mtu-frame-mqtun", text: head + "MTU = 9000\n[WGPIO]\nMode = compat-mqtun\n" + peers,
			stdout: ": ok (Mode = compat-mqtun, 1 peer; the file only: -system checks the interfaces too)\n"},
		// up's -wan and -lan stand for the keys; check, which the
		// unit runs before each reload, had no such flags, and its
		// error told to use them.
		{name: "flags-wan-lan", text: head + peers, flags: []string{"-wan", "eth0", "-lan", "eth1"},
			stdout: ": ok (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n"},
		{name: "flags-lan-is-wan", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-lan", "eth0"},
			err: `check: -lan: "eth0" is the WAN interface too`},
		{name: "flags-bad-name", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-name", "a/b"},
			err: `check: gateway name "a/b"`},
		{name: "flags-mode", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\nCPUs = 0\n" + peers, flags: []string{"-mode", "compat"},
			stdout: ": ok, with 1 warning above (Mode = compat, 1 peer; the file only: -system checks the interfaces too)\n", stderr: `key "CPUs": ignored in Mode = compat`},
		// And up's other overrides: check took -mode, -wan and -lan
		// only, and refused the rest of a unit's command line.
		{name: "flags-queues-xdp-metrics", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers,
			flags:  []string{"-queues", "2", "-xdp", "generic", "-metrics-addr", "127.0.0.1:9586"},
			stdout: ": ok, but 1 warning above says that wgpio up refuses to start as things stand (Mode = fastpath, 1 peer; the file only: -system checks the interfaces too)\n"},
		{name: "flags-bad-xdp", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-xdp", "bogus"},
			err: `check: -xdp "bogus": want auto, native or generic`},
		// Values up refuses on any system: check said ok of them.
		{name: "flags-queues-over", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-queues", "300"},
			err: `check: -queues 300: want 1 to 256`},
		{name: "flags-bad-wan", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-wan", "a/b"},
			err: `check: -wan "a/b" is not an interface name`},
		{name: "flags-bad-metrics", text: head + "[WGPIO]\nWAN = eth0\nLAN = eth1\n" + peers, flags: []string{"-metrics-addr", "nowhere"},
			err: `check: -metrics-addr "nowhere"`},
		// -system: the interfaces of this namespace, as up checks them
		// (before, check said ok of a file whose start failed).
		{name: "system-no-interface", text: head + "[WGPIO]\nMode = compat\nWAN = nonesuch0\nLAN = lo\n" + peers, flags: []string{"-system"},
			err: `system-no-interface.conf:6: key "WAN": no interface "nonesuch0" in this network namespace`},
		{name: "vlan-compat", text: head + "[WGPIO]\nMode = compat\nLANVLAN = 100\n" + peers,
			err: `vlan-compat.conf:6: key "LANVLAN": a VLAN of a trunk is served in Mode = fastpath only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".conf")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.mode != 0 {
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr strings.Builder
			err := check(&stdout, &stderr, append(tc.flags, "-c", path))
			if tc.err != "" {
				var ce *config.Error
				if err == nil || !strings.Contains(err.Error(), tc.err) || (tc.flags == nil && !errors.As(err, &ce)) {
					t.Fatalf("check(%s) = %v, want a *config.Error containing %q", tc.name, err, tc.err)
				}
				if stdout.Len() > 0 {
					t.Errorf("check(%s) printed %q on a bad file", tc.name, stdout.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("check(%s) = %v, want nil", tc.name, err)
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("check(%s) stdout = %q, want %q in it", tc.name, stdout.String(), tc.stdout)
			}
			if tc.stderr == "" && tc.name == "good" && stderr.Len() > 0 {
				t.Errorf("check(%s) stderr = %q, want nothing", tc.name, stderr.String())
			}
			// DIR/ stands for the file's directory.
			if want := strings.ReplaceAll(tc.stderr, "DIR/", dir+"/"); !strings.Contains(stderr.String(), want) {
				t.Errorf("check(%s) stderr = %q, want %q in it", tc.name, stderr.String(), want)
			}
			// The warnings come in the file's order.
			last := 0
			for _, m := range regexp.MustCompile(`\.conf:(\d+):`).FindAllStringSubmatch(stderr.String(), -1) {
				n, _ := strconv.Atoi(m[1])
				if n < last {
					t.Errorf("check(%s) warnings out of the file's order (line %d after %d):\n%s", tc.name, n, last, stderr.String())
				}
				last = n
			}
		})
	}
	var stderr strings.Builder
	var fe flagError
	if err := check(&strings.Builder{}, &stderr, nil); !errors.As(err, &fe) {
		t.Errorf("check without -c = %v, want a flagError (usage, exit status 2)", err)
	}
	// The file as the argument, as strip takes it: the same verdicts.
	good, bad := filepath.Join(dir, "flags-bad-xdp.conf"), filepath.Join(dir, "vlan-compat.conf")
	var stdout strings.Builder
	if err := check(&stdout, &strings.Builder{}, []string{good}); err != nil || !strings.Contains(stdout.String(), "flags-bad-xdp.conf") {
		t.Errorf("check FILE = %v (%q), want it fine, as check -c FILE", err, stdout.String())
	}
	if err := check(&strings.Builder{}, &strings.Builder{}, []string{bad}); err == nil || !strings.Contains(err.Error(), `vlan-compat.conf:6: key "LANVLAN"`) {
		t.Errorf("check FILE = %v, want the file's error, as check -c FILE", err)
	}
	for _, args := range [][]string{{good, bad}, {"-c", good, bad}} {
		if err := check(&strings.Builder{}, &strings.Builder{}, args); !errors.As(err, &fe) {
			t.Errorf("check %q = %v, want a flagError (one file only)", args, err)
		}
	}
}

// TestUnitChecksBeforeReload: dist/wgpio.service's ExecReload checks the
// instance's file (wgpio check -c, the same file ExecStart reads) before
// it signals the gateway, so that `systemctl reload` fails on a bad file
// (systemd runs ExecReload lines in order and stops at the first that
// fails). Before, it only sent SIGHUP, and reported success whatever the
// file held.
func TestUnitChecksBeforeReload(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "dist", "wgpio.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var start string
	var reload []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
			start = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "ExecReload="); ok {
			reload = append(reload, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	conf := ""
	if fields := strings.Fields(start); len(fields) > 0 {
		for i, a := range fields[:len(fields)-1] {
			if a == "-c" {
				conf = fields[i+1]
			}
		}
	}
	want := []string{"/usr/local/bin/wgpio check -c " + conf, "/bin/kill -HUP $MAINPID"}
	if conf == "" || strings.Join(reload, "\n") != strings.Join(want, "\n") {
		t.Errorf("ExecStart=%s\nExecReload lines = %q, want %q", start, reload, want)
	}
}

// TestCheckSystemWANAddress: `wgpio check -system` refuses a shared-mode
// file whose WAN has no IP address, at the WAN key's line, as the start
// refuses it ("WAN ... has no IP address"); it said ok, and the start
// that followed failed. With an address, or in owned mode, it is ok.
func TestCheckSystemWANAddress(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "ca")
	head := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nWAN = " + wan.A + "\nLAN = " + lan.A + "\n"
	peers := "[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	dir := t.TempDir()
	run := func(name, text string) error { return checkSystemIn(t, a, dir, name, text) }
	for _, mode := range []string{"fastpath", "compat"} {
		err := run("noaddr-"+mode, head+"Mode = "+mode+"\n"+peers)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != "WAN" || ce.Line != 5 || !strings.Contains(err.Error(), "has no IP address") {
			t.Errorf("Mode = %s, WAN without an address: check -system = %v, want a *config.Error at line 5, key WAN, \"has no IP address\"", mode, err)
		}
	}
	owned := head + "AddressMode = owned\nWANAddress = 198.18.98.1/24\nLANAddress = 198.18.99.1/24\n" + peers
	if err := run("owned", owned); err != nil {
		t.Errorf("owned mode, WAN without an address: check -system = %v, want nil", err)
	}
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := run("addr", head+peers); err != nil {
		t.Errorf("WAN with an address: check -system = %v, want nil", err)
	}
}

// TestCheckSystemOwnedKernelAddrs: in owned address mode, `wgpio check
// -system` warns, at the AddressMode line, of each interface the kernel
// still has an address on, naming it and how to remove it, as the start
// warns of them; it said ok without a word. No warning without them.
func TestCheckSystemOwnedKernelAddrs(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "co")
	text := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[WGPIO]\nWAN = " + wan.A + "\nLAN = " + lan.A + "\n" +
		"AddressMode = owned\nWANAddress = 198.18.98.1/24\nLANAddress = 198.18.99.1/24\n" +
		"[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.97.0/24\n"
	path := filepath.Join(t.TempDir(), "owned.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		var stderr strings.Builder
		if err := a.Do(func() error {
			return check(&strings.Builder{}, &stderr, []string{"-system", "-c", path})
		}); err != nil {
			t.Fatalf("check -system: %v", err)
		}
		return stderr.String()
	}
	if out := run(); strings.Contains(out, "AddressMode") {
		t.Errorf("no kernel addresses: check -system warned:\n%s", out)
	}
	if err := a.AddAddr(lan.A, "198.18.99.1/24"); err != nil {
		t.Fatal(err)
	}
	out := run()
	want := fmt.Sprintf(`owned.conf:7: key "AddressMode": owned, but the kernel has addresses of its own on LAN %s (198.18.99.1/24)`, lan.A)
	if !strings.Contains(out, want) || !strings.Contains(out, "ip addr del 198.18.99.1/24 dev "+lan.A) {
		t.Errorf("kernel address on the LAN: check -system said\n%s\nwant a warning %q and how to remove it", out, want)
	}
	if strings.Contains(out, "on WAN") {
		t.Errorf("warned of the WAN, which has no address:\n%s", out)
	}
}

// TestCheckSystemMTUIPv6WAN: a fast-path tunnel MTU below 1,280 with an
// IPv6 address on the WAN is taken by `wgpio check -system`, as with an
// IPv4 WAN and in Mode = compat, as Linux's wg0 takes it (the outer
// family bounds nothing inside the tunnel); it refused it at the MTU
// line, as the start did (fastpath.New).
func TestCheckSystemMTUIPv6WAN(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cm")
	conf := func(mode string) string {
		return "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\nMTU = 1200\n[WGPIO]\nMode = " + mode +
			"\nWAN = " + wan.A + "\nLAN = " + lan.A + "\n[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	}
	dir := t.TempDir()
	run := func(name, text string) error { return checkSystemIn(t, a, dir, name, text) }
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := run("v4", conf("fastpath")); err != nil {
		t.Errorf("IPv4 WAN, MTU 1200: check -system = %v, want nil", err)
	}
	if out, err := a.Run("ip", "addr", "add", "2001:db8:98::1/64", "dev", wan.A, "nodad"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := run("v6", conf("fastpath")); err != nil {
		t.Errorf("IPv6 WAN, MTU 1200: check -system = %v, want nil", err)
	}
	if err := run("compat", conf("compat")); err != nil {
		t.Errorf("Mode = compat, IPv6 WAN, MTU 1200: check -system = %v, want nil", err)
	}
}

// TestCheckSystemFrameMTUIPv6WAN: with IPv6 on the WAN, `wgpio check
// -system` refuses a tunnel MTU whose WAN frames no AF_XDP frame holds
// (3,743: 3,837 bytes with IPv6's 80 bytes of outer headers), at the MTU
// line, as the start refuses it; it said ok, having checked the file's
// IPv4 bound alone. An IPv4-only WAN takes it, and so does owned mode
// with an IPv4 WANAddress; an IPv6 WANAddress is refused.
func TestCheckSystemFrameMTUIPv6WAN(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cf")
	conf := func(mode, extra string) string {
		return "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\nMTU = 3743\n[WGPIO]\nMode = " + mode +
			"\nWAN = " + wan.A + "\nLAN = " + lan.A + "\n" + extra + "[Peer]\nPublicKey = " + peer.PublicKey().Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	}
	dir := t.TempDir()
	run := func(name, text string) error { return checkSystemIn(t, a, dir, name, text) }
	refused := func(what string, err error) {
		t.Helper()
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != "MTU" || ce.Line != 4 || !strings.Contains(err.Error(), "more than the 3836 an AF_XDP frame holds") {
			t.Errorf("%s, MTU 3743: check -system = %v, want a *config.Error at line 4, key MTU, naming the AF_XDP frame", what, err)
		}
	}
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := run("v4", conf("fastpath", "")); err != nil {
		t.Errorf("IPv4 WAN, MTU 3743: check -system = %v, want nil", err)
	}
	if err := run("owned4", conf("fastpath", "AddressMode = owned\nWANAddress = 198.18.97.1/24\nLANAddress = 198.18.99.1/24\n")); err != nil {
		t.Errorf("owned mode, IPv4 WANAddress, MTU 3743: check -system = %v, want nil", err)
	}
	refused("owned mode, IPv6 WANAddress", run("owned6", conf("fastpath", "AddressMode = owned\nWANAddress = 2001:db8:97::1/64\nLANAddress = 198.18.99.1/24\n")))
	if out, err := a.Run("ip", "addr", "add", "2001:db8:98::1/64", "dev", wan.A, "nodad"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	refused("IPv6 WAN", run("v6", conf("fastpath", "")))
	refused("Mode = compat, IPv6 WAN", run("compat", conf("compat", "")))
}

// TestCheckSystemMTUWarnings: `wgpio check -system` gives the warnings
// up logs at a start when full-size tunnel packets would leave the WAN as
// IP fragments (tunnel MTU 1480 + 60 bytes of outer IPv4 headers over a
// WAN MTU of 1500) and when the LAN's full frames are longer than an
// AF_XDP frame (a LAN MTU of 9000), in both modes that run on the WAN,
// with the start's numbers and fix; it gave none, and said ok alone. MTU
// 1420 on a 1500-byte LAN fits: no warning.
func TestCheckSystemMTUWarnings(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cw")
	conf := func(mode string, mtu int) string {
		return fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = 51820\nMTU = %d\n[WGPIO]\nMode = %s\nWAN = %s\nLAN = %s\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.18.99.0/24\n",
			priv.Base64(), mtu, mode, wan.A, lan.A, peer.PublicKey().Base64())
	}
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, mode := range []string{"fastpath", "compat"} {
		stderr, err := checkSystemOutput(t, a, dir, mode+"1480", conf(mode, 1480))
		want := fmt.Sprintf("wgpio: warning: WAN MTU: tunnel MTU 1480 + 60 bytes of outer IPv4, UDP and WireGuard headers = 1540, more than the MTU 1500 of WAN %s", wan.A)
		if err != nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "lower MTU in [Interface] to 1440") {
			t.Errorf("Mode = %s, MTU 1480 on a 1500 WAN: check -system = %v, stderr %q; want nil and the WAN MTU warning with its fix (%q...)", mode, err, stderr, want)
		}
		stderr, err = checkSystemOutput(t, a, dir, mode+"1420", conf(mode, 1420))
		if err != nil || strings.Contains(stderr, "WAN MTU") || strings.Contains(stderr, "LAN MTU") {
			t.Errorf("Mode = %s, MTU 1420 on a 1500 WAN: check -system = %v, stderr %q; want nil and no MTU warning", mode, err, stderr)
		}
	}
	// A jumbo LAN: its full frames are longer than an AF_XDP frame, which
	// up warns of ("LAN MTU"); check -system said ok alone.
	if out, err := a.Run("ip", "link", "set", "dev", lan.A, "mtu", "9000"); err != nil {
		t.Fatalf("ip link set %s mtu 9000: %v\n%s", lan.A, err, out)
	}
	for _, mode := range []string{"fastpath", "compat"} {
		stderr, err := checkSystemOutput(t, a, dir, mode+"jumbo", conf(mode, 1420))
		want := fmt.Sprintf("wgpio: warning: LAN MTU: LAN %s has MTU 9000", lan.A)
		if err != nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "lower the LAN MTU to") {
			t.Errorf("Mode = %s, LAN MTU 9000: check -system = %v, stderr %q; want nil and the LAN MTU warning with its fix (%q...)", mode, err, stderr, want)
		}
	}
}

// checkSystemOutput is checkSystemIn returning what check wrote to
// stderr too.
func checkSystemOutput(t *testing.T, ns *topo.NS, dir, name, text string) (string, error) {
	t.Helper()
	path := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	var cerr error
	if err := ns.Do(func() error {
		cerr = check(&strings.Builder{}, &stderr, []string{"-system", "-c", path})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return stderr.String(), cerr
}

// checkSystemRig makes the namespace of a check -system test (tag names
// its topology): a, with the A ends of two veths for the WAN and the LAN,
// and the gateway's and a peer's private keys.
func checkSystemRig(t *testing.T, tag string) (a *topo.NS, wan, lan *topo.Veth, priv, peer noise.PrivateKey) {
	t.Helper()
	tp := testenv.Topology(t, tag)
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	wan, lan = testenv.Veth(t, tp, a, b), testenv.Veth(t, tp, a, b)
	var err error
	if priv, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	if peer, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	return a, wan, lan, priv, peer
}

// checkSystemIn writes text to dir/name.conf and returns what `wgpio check
// -system -c` says of it in ns.
func checkSystemIn(t *testing.T, ns *topo.NS, dir, name, text string) error {
	t.Helper()
	_, err := checkSystemOut(t, ns, dir, name, text)
	return err
}

// checkSystemOut is checkSystemIn with what check printed on stderr (its
// warnings).
func checkSystemOut(t *testing.T, ns *topo.NS, dir, name, text string) (stderr string, err error) {
	t.Helper()
	path := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if derr := ns.Do(func() error {
		err = check(&strings.Builder{}, &out, []string{"-system", "-c", path})
		return nil
	}); derr != nil {
		t.Fatal(derr)
	}
	return out.String(), err
}

// TestUnitAllowsSocketFamilies: dist/wgpio.service's RestrictAddressFamilies
// lets in every address family the gateway's own code opens a socket of
// (unix.Socket(unix.AF_..., in the packages it is built from; tests and
// tools aside), besides AF_UNIX (the UAPI, stats and capture sockets) and
// AF_NETLINK (routes, addresses, neighbours), which libraries open.
// Under systemd any other family's socket() fails with EAFNOSUPPORT.
// Before, AF_PACKET was left out: owned address mode's reader of ICMPv6
// "packet too big" (internal/toobig.ListenLink) failed under the unit,
// and the gateway ran without path MTU discovery toward IPv6 endpoints.
func TestUnitAllowsSocketFamilies(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "dist", "wgpio.service"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, l := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "RestrictAddressFamilies="); ok {
			for _, f := range strings.Fields(v) {
				allowed[f] = true
			}
		}
	}
	want := map[string]string{"AF_UNIX": "UAPI socket", "AF_NETLINK": "netlink"}
	re := regexp.MustCompile(`unix\.Socket\(\s*unix\.(AF_[A-Z0-9]+)`)
	root := filepath.Join("..", "..")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "tools", "bench", "examples", "internal/testing", "internal/testenv", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			want[string(m[1])] = rel
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"AF_INET", "AF_INET6", "AF_PACKET", "AF_XDP"} {
		if _, ok := want[f]; !ok {
			t.Errorf("no unix.Socket(unix.%s found in the sources: the scan is broken", f)
		}
	}
	for f, where := range want {
		if !allowed[f] {
			t.Errorf("dist/wgpio.service: RestrictAddressFamilies lacks %s, which %s opens", f, where)
		}
	}
}

// TestCheckSystemListenPortHeld: `wgpio check -system` warns of a
// ListenPort another socket of the host holds on the WAN's address (a wg0
// still up), which up refuses; it said ok alone. A warning, since the
// holder may be the gateway itself, already up. Both modes that run on
// the WAN; a free port gives none. The warning names the file's line, as
// up's error does.
func TestCheckSystemListenPortHeld(t *testing.T) {
	a, wan, lan, priv, peer := checkSystemRig(t, "cp")
	conf := func(mode string, port int) string {
		return fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\n[WGPIO]\nMode = %s\nWAN = %s\nLAN = %s\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.18.99.0/24\n",
			priv.Base64(), port, mode, wan.A, lan.A, peer.PublicKey().Base64())
	}
	if err := a.AddAddr(wan.A, "198.18.98.1/24"); err != nil {
		t.Fatal(err)
	}
	// The LAN's address: without one, check -system warns of it.
	if err := a.AddAddr(lan.A, "198.18.97.1/24"); err != nil {
		t.Fatal(err)
	}
	var held *net.UDPConn
	if err := a.Do(func() (err error) {
		held, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 41820}) // 0.0.0.0, as wg0's socket
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	for _, mode := range []string{"fastpath", "compat"} {
		stderr, err := checkSystemOutput(t, a, dir, mode+"held", conf(mode, 41820))
		if err != nil || !strings.Contains(stderr, `held.conf:3: key "ListenPort": `) || !strings.Contains(stderr, "41820") || !strings.Contains(stderr, "wgpio up refuses it") {
			t.Errorf("Mode = %s, ListenPort held: check -system = %v, stderr %q; want nil and a warning at the key's line that up refuses the port", mode, err, stderr)
		}
		stderr, err = checkSystemOutput(t, a, dir, mode+"free", conf(mode, 41821))
		if err != nil || strings.Contains(stderr, "ListenPort") {
			t.Errorf("Mode = %s, ListenPort free: check -system = %v, stderr %q; want nil and no warning", mode, err, stderr)
		}
	}
}

// newPrivateKey returns a fresh private key or fails the test.
func newPrivateKey(t *testing.T) noise.PrivateKey {
	t.Helper()
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
