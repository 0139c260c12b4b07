//go:build linux

package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/plural"
)

const checkUsage = `usage: wgpio check [-system] [-name NAME] -c FILE (or FILE, without -c)

Reads FILE as wgpio up and a reload (SIGHUP) read it, and reports its
errors (file, line and key; exit status 1) or that it is fine (exit
status 0), with the warnings up would log (with an error too, as up
logs them before it refuses): a file every user may read, keys wgpio
does not act on, and those the file's Mode ignores. It looks
at the file only, not at the system (the interfaces, CPUs and privileges
are checked by up), unless -system: then also at the interfaces, their
queues and the CPUs, in this network namespace, as up checks them at a
start, with up's warnings of a WAN MTU over which full-size tunnel
packets would leave as IP fragments, of a LAN MTU whose full frames
are longer than an AF_XDP frame, of a LAN without an IPv4 or global
IPv6 address (shared address mode), of forwarding off (the sysctls
net.ipv4.ip_forward, net.ipv6.conf.all.forwarding) for a fast-path
gateway with an Address and of addresses the kernel keeps on the
interfaces in owned address mode, up's warning of the host's netfilter
rules that the gateway's traffic skips (fastpath and compat modes: a
rule on the WireGuard port, input or prerouting, no longer applies),
and warnings of a ListenPort or MetricsAddress
another socket holds and of a UAPI socket of the gateway's name (the
file's, or -name's) that answers, which up refuses; a WAN or LAN
another running wgpio gateway holds is an error, naming that gateway
and its pid, as up refuses to start on it, and in Mode =
compat-mqtun forwarding off is an error, as up refuses it (run it where
the gateway runs: ip netns exec NS wgpio check -system -c FILE). It
applies nothing; the flags that override [WGPIO] keys (-mode, -wan,
-lan, -queues, -xdp, -metrics-addr) check it as up runs it with the
same flags.
dist/wgpio.service runs it before each reload, so that systemctl reload
fails on a file a reload would not apply.

`

func cmdCheck(args []string) error { return check(os.Stdout, os.Stderr, args) }

// check is cmdCheck writing its verdict to stdout and the warnings to
// stderr.
func check(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	conf := fs.String("c", "", "wg-quick style configuration `file` (or as the argument)")
	system := fs.Bool("system", false, "also check the interfaces, queues and CPUs here, as up does")
	name := fs.String("name", "", "the gateway's `name`, as up's -name (default: the file name without .conf)")
	overrides := addOverrideFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := overrides.check("check"); err != nil {
		return err
	}
	if *conf == "" && fs.NArg() == 1 {
		*conf = fs.Arg(0) // as strip takes it
	} else if fs.NArg() > 0 || *conf == "" {
		err := fmt.Errorf("check takes one configuration file: wgpio check -c FILE (or wgpio check FILE)")
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return flagError{err}
	}
	if *name != "" {
		if err := checkName("check", *name, *conf); err != nil {
			return err
		}
	}
	f, err := loadConfig(*conf)
	if err != nil {
		return err
	}
	defer f.Interface.PrivateKey.Zero()
	w := f.WGPIO
	overrides.apply(&w)
	// warned counts the warnings printed, and refusing those that say
	// up refuses to start as things stand (saysUpRefuses), for the
	// summary: "ok" alone under them read as a start that would work.
	var warned, refusing int
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		warned++
		if saysUpRefuses(msg) {
			refusing++
		}
		fmt.Fprintf(stderr, "wgpio: warning: %s\n", msg)
	}
	// The warnings of the file, given with an error too, as up logs them
	// before it refuses the file or the system (check -system -mode
	// compat-mqtun with forwarding off printed the error alone, without
	// the keys that Mode ignores).
	fileWarnings := func() {
		// up names the gateway after the file unless -name says
		// otherwise; a name no interface can have is refused there
		// (checkName). Only a warning: the unit's reload check runs
		// without -name, where up runs with one.
		if n := strings.TrimSuffix(filepath.Base(*conf), ".conf"); *name == "" && checkGatewayName(n) != nil {
			warn("%s: wgpio up names the gateway after the file, %q, which cannot name an interface "+
				"(1 to 15 bytes, no '/', ':' or white space), so `wgpio up -c %s` without -name refuses to start: "+
				"give it -name NAME, or rename the file (under dist/wgpio.service, whose instance names both the file and the gateway, rename the file and use that instance)", *conf, n, shellQuote(*conf))
		}
		if perm, ok := worldAccessible(*conf); ok {
			warn("%s: %s (mode %#o); fix: chmod o-rwx %s", *conf, worldAccessibleText(perm), perm, shellQuote(*conf))
		}
		// In the file's order (the parser's warnings came first, then
		// the keys the Mode ignores); a summary of a kind (no line)
		// after.
		warnings := append(slices.Clone(f.Warnings), ignoredKeys(f, w)...)
		slices.SortStableFunc(warnings, func(a, b config.Warning) int {
			return cmp.Compare(lineOrLast(a.Line), lineOrLast(b.Line))
		})
		for _, warning := range warnings {
			warn("%s", warning)
		}
	}
	if err := checkFile(f, w); err != nil {
		fileWarnings()
		return forCheck(err)
	}
	if *system {
		gw := *name
		if gw == "" {
			gw = strings.TrimSuffix(filepath.Base(*conf), ".conf")
		}
		if err := checkSystem(f, w, gw); err != nil {
			fileWarnings()
			return forCheck(err)
		}
		held, err := checkInterfaceLocks(f, w, gw)
		if err != nil {
			fileWarnings()
			return forCheck(err)
		}
		for _, warning := range append(held, systemWarnings(f, w, gw)...) {
			warn("%s", warning)
		}
	}
	fileWarnings()
	what := "the file only: -system checks the interfaces too"
	switch {
	case *system && w.Mode == config.ModeCompatMQTUN:
		// It runs on no WAN or LAN of its own, so -system checks none
		// (it said "this namespace's interfaces" all the same).
		what = "the file, and this namespace's forwarding sysctls, TUN name and held ports (compat-mqtun takes no WAN or LAN)"
	case *system:
		what = "the file and this namespace's interfaces"
	}
	ok := "ok"
	switch {
	case refusing > 0:
		say := "say"
		if refusing == 1 {
			say = "says"
		}
		ok = fmt.Sprintf("ok, but %s above %s that wgpio up refuses to start as things stand",
			plural.Count(refusing, "warning", "warnings"), say)
	case warned > 0:
		ok = "ok, with " + plural.Count(warned, "warning", "warnings") + " above"
	}
	fmt.Fprintf(stdout, "%s: %s (Mode = %s, %s; %s)\n", *conf, ok, w.Mode, plural.Count(len(f.Peers), "peer", "peers"), what)
	return nil
}

// lineOrLast orders a warning without a line (a summary) after those with
// one.
func lineOrLast(line int) int {
	if line == 0 {
		return math.MaxInt
	}
	return line
}

// upRefusesPhrases are the words of the warnings that say wgpio up
// refuses to start as things stand: a port, socket or lock held, perhaps
// by this gateway, already up (listenPortWarning, heldWarnings,
// checkInterfaceLocks: "wgpio up refuses", "unless that is this
// gateway"), a file name no interface can have ("refuses to start"), and
// in compat-mqtun an MTU below 1280 with IPv6 prefixes, whose routes the
// kernel refuses into the TUN (config's MTU warning: "stops wgpio up";
// the summary said "ok, with 1 warning above" of it).
var upRefusesPhrases = []string{"refuses to start", "wgpio up refuses", "unless that is this gateway", "stops wgpio up"}

// saysUpRefuses reports whether the warning msg says that up refuses to
// start (upRefusesPhrases).
func saysUpRefuses(msg string) bool {
	for _, p := range upRefusesPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
