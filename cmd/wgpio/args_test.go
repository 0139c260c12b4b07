//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestArgumentErrors: arguments a new user gets wrong are refused before
// anything is opened, each with a message that names the argument and the
// fix.
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		cmd  func([]string) error
		args []string
		want string
	}{
		{cmdUp, []string{"/etc/wgpio/wg0.conf"}, `up: unexpected argument "/etc/wgpio/wg0.conf" (the configuration file goes after -c: wgpio up -c /etc/wgpio/wg0.conf)`},
		// wg-quick's habit: a bare name stands for its file.
		{cmdUp, []string{"wgnosuch0"}, `up: unexpected argument "wgnosuch0" (the configuration file goes after -c: wgpio up -c /etc/wgpio/wgnosuch0.conf)`},
		{cmdUp, []string{"-c", "wg0.conf", "extra"}, `up: unexpected argument "extra" after the flags`},
		{cmdUp, []string{}, `up: -c FILE is required`},
		{cmdUp, []string{"-c", "wg0.conf", "-mode", "bogus"}, `up: -mode "bogus": want fastpath, compat or compat-mqtun`},
		{cmdUp, []string{"-c", "wg0.conf", "-xdp", "turbo"}, `up: -xdp "turbo": want auto, native or generic`},
		{cmdUp, []string{"-c", "wg0.conf", "-queues", "-2"}, `up: -queues -2: want 1 or more (left out, or 0: the file's Queues, else one per RX queue of the interfaces)`},
		// Refused before the file is read, as the file's Queues, WAN and
		// LAN are; check (without -system) said ok of them.
		{cmdUp, []string{"-c", "wg0.conf", "-queues", "300"}, `up: -queues 300: want 1 to 256`},
		{cmdUp, []string{"-c", "wg0.conf", "-wan", "a/b"}, `up: -wan "a/b" is not an interface name`},
		{cmdUp, []string{"-c", "wg0.conf", "-lan", "averyveryverylonglan"}, `up: -lan "averyveryverylonglan" is not an interface name`},
		// Refused before the gateway starts, as the file's MetricsAddress
		// is; "foo" was refused only once the interfaces were checked,
		// with a hint of a port in use, and ":0" served on a random port.
		{cmdUp, []string{"-c", "wg0.conf", "-metrics-addr", "foo"}, `up: -metrics-addr "foo": want host:port`},
		{cmdUp, []string{"-c", "wg0.conf", "-metrics-addr", ":0"}, `up: -metrics-addr ":0": port "0": want 1 to 65535`},
		{cmdUp, []string{"-c", "wg0.conf", "-metrics-addr", "127.0.0.1:99999"}, `up: -metrics-addr "127.0.0.1:99999": port "99999": want 1 to 65535`},
		{cmdCapture, []string{}, `capture: a gateway NAME is required`},
		{cmdCapture, []string{"a", "b"}, `capture: one gateway NAME, got 2: a b`},
		{cmdCapture, []string{"-c", "-1", "wg0"}, `capture: -c -1: want 0 (until Ctrl-C) or a number of frames`},
		{cmdCapture, []string{"-s", "0", "wg0"}, `capture: -s 0: want the number of bytes kept`},
		{cmdCapture, []string{"../../etc/passwd"}, `capture: "../../etc/passwd" cannot be a gateway name`},
		{cmdStats, []string{"a/b"}, `stats: "a/b" cannot be a gateway name`},
		{cmdDemo, []string{"-rate", "0"}, `demo: -rate 0: want packets per second, 1 or more`},
		{cmdDemo, []string{"-duration", "-1s"}, `demo: -duration -1s: want 0 (until Ctrl-C) or a positive duration`},
		{cmdDemo, []string{"extra"}, `demo: unexpected argument "extra"`},
		{cmdDemo, []string{"-queues", "-1"}, `demo: -queues -1: want 1 to 256`},
		{cmdCapture, []string{"-l4port", "-1", "wg0"}, `capture: -l4port -1 out of range 0-65535`},
		{cmdStrip, []string{}, `strip takes one configuration file, got 0 arguments`},
	} {
		err := tc.cmd(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	f, err := captureRequest{Port: "any", Dir: "any", Host: "notanip"}.filter()
	if err == nil || !strings.Contains(err.Error(), `host "notanip" is not an IP address`) {
		t.Errorf("filter(host notanip) = %+v, %v; want an error naming the host", f, err)
	}
}

// TestFlagErrorPrintedOnce: a flag the flag package refuses (it prints the
// error and the usage) comes back as a flagError, which main does not print
// again.
func TestFlagErrorPrintedOnce(t *testing.T) {
	for _, cmd := range []func([]string) error{cmdUp, cmdStats, cmdDemo, cmdCapture, cmdVersion, cmdStrip} {
		var fe flagError
		if err := cmd([]string{"-no-such-flag"}); !errors.As(err, &fe) {
			t.Errorf("unknown flag: error %v (%T), want a flagError", err, err)
		}
	}
	if err := cmdVersion([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("version -h: error %v, want flag.ErrHelp (the usage printed)", err)
	}
	if err := cmdVersion([]string{"extra"}); !errors.As(err, new(flagError)) {
		t.Errorf("version extra: error %v (%T), want a flagError", err, err)
	}
	var fe flagError
	if err := cmdUp([]string{"-c"}); !errors.As(err, &fe) {
		t.Errorf("up -c without a value: error %v (%T), want a flagError", err, err)
	}
}

// TestCPUsOutsideAffinity: a CPU the process may not run on is a
// configuration error naming file, line and key, found before anything
// starts.
func TestCPUsOutsideAffinity(t *testing.T) {
	f, err := config.Parse("wg0.conf", strings.NewReader(
		"[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n\n[WGPIO]\nCPUs = 0, 8000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.WGPIO.Lines["CPUs"] != 5 {
		t.Errorf("Lines[CPUs] = %d, want 5", f.WGPIO.Lines["CPUs"])
	}
	err = checkCPUs(f.Name, f.WGPIO)
	want := `wg0.conf:5: key "CPUs": CPU 8000 is not one this process may run on (allowed: 0`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("checkCPUs = %v, want %q…", err, want)
	}
	f.WGPIO.CPUs = []int{0}
	if err := checkCPUs(f.Name, f.WGPIO); err != nil {
		t.Errorf("checkCPUs(CPU 0) = %v, want nil", err)
	}
}

// TestStartErrorsNameTheKey: problems found when the gateway starts, not
// when the file is parsed, still name the file, line and key (or the flag
// that set the value), and a gateway name that cannot name an interface is
// refused before anything opens.
func TestStartErrorsNameTheKey(t *testing.T) {
	f, err := config.Parse("wg0.conf", strings.NewReader(
		"[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n\n[WGPIO]\nWAN = nosuchif0\nLAN = lo\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = checkInterfaces(f, f.WGPIO)
	if want := `wg0.conf:5: key "WAN": no interface "nosuchif0" in this network namespace (list them with ` + "`ip link`)"; err == nil || err.Error() != want {
		t.Errorf("checkInterfaces = %v, want %q", err, want)
	}
	w := f.WGPIO
	w.Lines = map[string]int{}
	if err := checkInterfaces(f, w); err == nil || !strings.HasPrefix(err.Error(), `up: -wan: no interface "nosuchif0"`) {
		t.Errorf("checkInterfaces (WAN from -wan) = %v, want it to name -wan", err)
	}
	// A kernel VLAN device not made (no 8021q on the host, or not yet)
	// is told how to make it, or how to do without it; lo, the trunk
	// here, is in every namespace. Compat modes run on no VLAN of a
	// trunk: no hint there. It said only "no interface".
	vf, err := config.Parse("wg0.conf", strings.NewReader(
		"[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n\n[WGPIO]\nWAN = lo\nLAN = lo.200\n"))
	if err != nil {
		t.Fatal(err)
	}
	vw := vf.WGPIO
	vw.Mode = config.ModeFastPath
	want := `wg0.conf:6: key "LAN": no interface "lo.200" in this network namespace (list them with ` + "`ip link`); " +
		"for VLAN 200 of lo make the kernel's VLAN device, `ip link add link lo name lo.200 type vlan id 200` (module 8021q), " +
		"or, in AddressMode = owned, which needs none, set LAN = lo and LANVLAN = 200"
	if err := checkInterfaces(vf, vw); err == nil || err.Error() != want {
		t.Errorf("checkInterfaces (LAN = lo.200) = %v, want %q", err, want)
	}
	vw.Mode = config.ModeCompat
	want = `wg0.conf:6: key "LAN": no interface "lo.200" in this network namespace (list them with ` + "`ip link`)"
	if err := checkInterfaces(vf, vw); err == nil || err.Error() != want {
		t.Errorf("checkInterfaces (LAN = lo.200, Mode = compat) = %v, want %q", err, want)
	}
	for _, name := range []string{"lo.0", "lo.4095", "lo.x", "lo.020", "nosuch0.200"} {
		if h := vlanDeviceHint("LAN", name, config.ModeFastPath); h != "" {
			t.Errorf("vlanDeviceHint(%q) = %q, want none", name, h)
		}
	}
	for _, name := range []string{"averyveryverylongname0", "a/b", "", "x y"} {
		if err := checkName("up", name, "/etc/wgpio/"+name+".conf"); err == nil || !strings.Contains(err.Error(), "choose one with -name") {
			t.Errorf("checkName(%q) = %v, want a refusal that mentions -name", name, err)
		}
	}
	if err := checkName("up", "wg0", "wg0.conf"); err != nil {
		t.Errorf("checkName(wg0) = %v", err)
	}
	q := config.WGPIO{WAN: "lo", LAN: "lo", Queues: 300, Lines: map[string]int{"Queues": 9}}
	if err := checkQueues("wg0.conf", q); err == nil || !strings.HasPrefix(err.Error(), `wg0.conf:9: key "Queues": 300 queues; the fast path runs at most 256`) {
		t.Errorf("checkQueues(300) = %v", err)
	}
}

// TestCheckHelp: `wgpio check -h` is laid out as the other commands'
// help: lines within 80 columns, a blank line before the flags (one line
// ran to 101, and the flags followed the text at once).
func TestCheckHelp(t *testing.T) {
	var out strings.Builder
	if err := check(io.Discard, &out, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("check(-h) = %v, want flag.ErrHelp", err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if len(l) > 80 {
			t.Errorf("wgpio check -h: a line of %d columns: %q", len(l), l)
		}
	}
	if !strings.Contains(out.String(), ".\n\n  -c file") {
		t.Errorf("wgpio check -h: no blank line before the flags:\n%s", out.String())
	}
}

// TestUpHelp: `wgpio up -h` says how to stop and reload a gateway and
// where to watch it, not only its flags (the reload by SIGHUP was in no
// help text).
func TestUpHelp(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	err = cmdUp([]string{"-h"})
	os.Stderr = stderr
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("cmdUp(-h) = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: wgpio up -c FILE", "SIGTERM", "SIGHUP", "wg syncconf", "wgpio stats NAME", "-metrics-addr"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("wgpio up -h does not say %q:\n%s", want, out)
		}
	}
}

// TestDemoHelp: `wgpio demo -h` says what the demo does, not only its
// flags (it printed "Usage of demo:" and the flags).
func TestDemoHelp(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	err = cmdDemo([]string{"-h"})
	os.Stderr = stderr
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("cmdDemo(-h) = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: wgpio demo [flags]", "stock wireguard-go", "Ctrl-C", "wgpio stats", "Needs root", "-duration"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("wgpio demo -h does not say %q:\n%s", want, out)
		}
	}
}

// TestWarnIgnored: `wgpio up` warns of each key of the file the chosen
// mode does not act on, naming file, line and key, and of none it acts
// on. Compat mode said nothing of SourcePorts and HandshakeWorkers, which
// wireguard-go never sees. The compat modes serve metrics (MetricsAddress)
// without per-peer ones (MetricsPeers).
func TestWarnIgnored(t *testing.T) {
	const file = "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\n\n[WGPIO]\n" +
		"Mode = %s\nWAN = wan0\nLAN = lan0\nQueues = 2\nCPUs = 0\nHandshakeWorkers = 2\nSourcePorts = 51820-51823\nMSSClamp = auto\nReplayWindow = auto\n" +
		"MetricsAddress = 127.0.0.1:9586\nMetricsPeers = 10\n"
	for _, tt := range []struct {
		mode      string
		want, not []string // keys warned of, keys not
	}{
		{"fastpath", nil, []string{"Queues", "CPUs", "HandshakeWorkers", "SourcePorts", "MSSClamp", "ReplayWindow", "MetricsAddress", "MetricsPeers"}},
		{"compat", []string{"CPUs", "HandshakeWorkers", "SourcePorts", "ReplayWindow"}, []string{"Queues", "WAN", "LAN", "MSSClamp", "MetricsAddress", "MetricsPeers"}},
		{"compat-mqtun", []string{"WAN", "LAN", "CPUs", "HandshakeWorkers", "SourcePorts", "MSSClamp", "ReplayWindow"}, []string{"Queues", "MetricsAddress", "MetricsPeers"}},
	} {
		f, err := config.Parse("wg0.conf", strings.NewReader(fmt.Sprintf(file, tt.mode)))
		if err != nil {
			t.Fatal(err)
		}
		var logs testenv.LogBuffer
		warnIgnored(slog.New(slog.NewTextHandler(&logs, nil)), f, f.WGPIO)
		for _, k := range tt.want {
			if want := fmt.Sprintf(`wg0.conf:%d: key \"%s\": ignored`, f.WGPIO.Lines[k], k); !strings.Contains(logs.String(), want) {
				t.Errorf("Mode = %s: no warning %q in:\n%s", tt.mode, want, logs.String())
			}
		}
		for _, k := range tt.not {
			if strings.Contains(logs.String(), fmt.Sprintf(`key \"%s\"`, k)) {
				t.Errorf("Mode = %s: warned of %s, which it acts on:\n%s", tt.mode, k, logs.String())
			}
		}
	}
}

// TestWarnFwMark: a FwMark is warned of (file, line, key) in the modes
// that carry no mark, not in compat-mqtun, whose sockets carry it, and
// not when it asks for none ("off", 0). The parser warned of every
// FwMark line, compat-mqtun's and "off" included: it cannot know the
// mode (a later [WGPIO] line, or -mode).
func TestWarnFwMark(t *testing.T) {
	const file = "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\nFwMark = %s\n\n[WGPIO]\nMode = %s\nWAN = wan0\nLAN = lan0\n"
	for _, tt := range []struct {
		mark, mode string
		warn       bool
	}{
		{"0x10", "fastpath", true},
		{"0x10", "compat", true},
		{"0x10", "compat-mqtun", false},
		{"off", "fastpath", false},
		{"0", "compat", false},
	} {
		f, err := config.Parse("wg0.conf", strings.NewReader(fmt.Sprintf(file, tt.mark, tt.mode)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range append(slices.Clone(f.Warnings), ignoredKeys(f, f.WGPIO)...) {
			if w.Key == "FwMark" {
				got = append(got, w.String())
			}
		}
		want := 0
		if tt.warn {
			want = 1
		}
		if len(got) != want {
			t.Errorf("FwMark = %s, Mode = %s: warnings %q, want %d", tt.mark, tt.mode, got, want)
		}
		for _, w := range got {
			if prefix := "wg0.conf:4: key \"FwMark\": reported by wg show, but marks no packet in Mode = " + tt.mode; !strings.HasPrefix(w, prefix) {
				t.Errorf("FwMark = %s, Mode = %s: warning %q, want it to start %q", tt.mark, tt.mode, w, prefix)
			}
		}
	}
}

// TestTopLevelHelp: every spelling of help the subcommands take (the flag
// package's -h and -help) prints the usage and exits 0 at the top level
// too; `wgpio -help` was refused as an unknown command, exit status 2.
func TestTopLevelHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		out, err := exec.Command(wgpioBin, arg).CombinedOutput()
		if err != nil {
			t.Errorf("wgpio %s: %v, want exit status 0\n%s", arg, err, out)
		}
		if !strings.HasPrefix(string(out), "usage: wgpio <command> [flags]") {
			t.Errorf("wgpio %s printed %q, want the usage", arg, out)
		}
	}
}

// TestUpUsageErrors: up without -c, or with a stray argument, is a usage
// error (flagError: the usage printed, exit status 2), as check's, where
// it exited 1 without the usage.
func TestUpUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"wg0.conf"}, {"-c", "wg0.conf", "extra"}} {
		var fe flagError
		if err := cmdUp(args); !errors.As(err, &fe) {
			t.Errorf("up %q: error %v (%T), want a usage error (exit status 2)", args, err, err)
		}
	}
}

// TestErrorLines: every line of an error main prints reads as wgpio's (a
// file's several errors, a line each: only the first had "wgpio: "),
// and a hint in parentheses on its own line is left as it is.
func TestErrorLines(t *testing.T) {
	err := errors.New("bad.conf:5: key \"Queues\": -1 out of range 1-256\nbad.conf:7: key \"MTU\": \"x\" is not a number\n(a hint)")
	want := "wgpio: bad.conf:5: key \"Queues\": -1 out of range 1-256\nwgpio: bad.conf:7: key \"MTU\": \"x\" is not a number\n(a hint)\n"
	if got := errorLines(err); got != want {
		t.Errorf("errorLines = %q, want %q", got, want)
	}
}

// TestWarnCompatAddress: an Address in Mode = compat is warned of (file,
// line, key): that mode has no interface into the tunnel for the host, so
// the host's own packets to the peers' networks leave the WAN in
// cleartext by a default route (a helper's differential against Linux's
// wg0 caught them with tcpdump), where wg-quick routes them into wg0.
// Nothing was said. Not in fastpath (its exception TUN holds Address) or
// compat-mqtun (its TUN does).
func TestWarnCompatAddress(t *testing.T) {
	const file = "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\nAddress = 198.19.0.1/24\n\n[WGPIO]\nMode = %s\nWAN = wan0\nLAN = lan0\n"
	for mode, want := range map[string]int{"compat": 1, "fastpath": 0, "compat-mqtun": 0} {
		f, err := config.Parse("wg0.conf", strings.NewReader(fmt.Sprintf(file, mode)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range ignoredKeys(f, f.WGPIO) {
			if w.Key == "Address" {
				got = append(got, w.String())
			}
		}
		if len(got) != want {
			t.Errorf("Mode = %s: Address warnings %q, want %d", mode, got, want)
		}
		for _, w := range got {
			if prefix := `wg0.conf:4: key "Address": given to no interface in Mode = compat`; !strings.HasPrefix(w, prefix) || !strings.Contains(w, "cleartext") {
				t.Errorf("warning %q, want it to start %q and name the cleartext", w, prefix)
			}
		}
	}
}
