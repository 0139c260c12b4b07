//go:build linux

// Command wgpio runs a WireGuard gateway on wgpio's dataplane.
//
//	wgpio up -c wg0.conf        run a gateway from a wg-quick style file
//	wgpio demo                  a throwaway topology with a stock wireguard-go peer
//	wgpio stats [name...]       running gateways' per-queue counters
//	wgpio capture NAME          what the fast path sees on a port, as pcapng
//	wgpio strip FILE            the file's wg(8) keys, for wg syncconf
//	wgpio check -c FILE         whether up and a reload would take the file
//	wgpio version               the module version, VCS revision and Go version
//
// The configuration file is wg-quick's, plus an optional [WGPIO] section
// (see package config). Its Mode picks the data path: fastpath (wgpio's
// engine on AF_XDP, the default), compat (stock wireguard-go on wgpio's bind
// and tundev over AF_XDP) or compat-mqtun (stock wireguard-go on a
// multi-queue kernel TUN and kernel UDP sockets, no XDP). The gateway serves
// the UAPI socket /var/run/wireguard/<name>.sock, so wg(8) shows and sets it,
// and /var/run/wgpio/<name>.stats (and, in fastpath mode, <name>.capture).
// SIGINT and SIGTERM stop it (one during the start waits for it to end; a
// second aborts it: watchStart); SIGHUP applies the edited file as `wg
// syncconf` would (reload.go).
//
// Privileges: root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF with
// RLIMIT_MEMLOCK large enough for the AF_XDP UMEM (or CAP_IPC_LOCK); see
// dist/wgpio.service.
//
// Linux only (AF_XDP, netlink, TUN): every file is built for Linux alone.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

const usage = `usage: wgpio <command> [flags]

commands:
  up -c FILE      run a gateway from a wg-quick style configuration file
  demo            build a throwaway topology (two hosts, a wgpio gateway and a
                  stock wireguard-go gateway), send traffic, show live counters
  stats [NAME...] print running gateways' per-queue counters (-json)
  capture NAME    write what the fast path receives and transmits as pcapng
                  (-port lan|wan -dir rx|tx -proto -host -l4port -s BYTES -w FILE -c N)
  strip FILE      print the file's wg(8) keys, for wg syncconf NAME <(wgpio strip FILE)
  check -c FILE   report the file's errors and warnings, as up and a reload read it
  version         print the version

Run "wgpio <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = cmdUp(os.Args[2:])
	case "demo":
		err = cmdDemo(os.Args[2:])
	case "stats":
		err = cmdStats(os.Args[2:])
	case "capture":
		err = cmdCapture(os.Args[2:])
	case "strip":
		err = cmdStrip(os.Args[2:])
	case "check":
		err = cmdCheck(os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	case "version", "-version", "--version":
		err = cmdVersion(os.Args[2:])
	case "down":
		// wg-quick's habit: a gateway is a process, stopped as one.
		fmt.Fprintf(os.Stderr, "wgpio: no command \"down\": a gateway stops with its process (Ctrl-C, SIGTERM, or systemctl stop wgpio@NAME); `wgpio stats` lists the running ones\n")
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "wgpio: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the command's usage
	}
	var fe flagError
	if errors.As(err, &fe) {
		os.Exit(2) // the flag package printed the error and the usage
	}
	if err != nil {
		fmt.Fprint(os.Stderr, errorLines(err))
		os.Exit(1)
	}
}

// errorLines is err as main prints it: each line of it (a file's several
// errors are a line each) after "wgpio: ", so that every one reads as
// wgpio's; a hint in parentheses on a line of its own stays as it is.
func errorLines(err error) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		if !strings.HasPrefix(l, "(") {
			b.WriteString("wgpio: ")
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// flagError is a command line the flag package refused; it has printed
// why, and the command's usage.
type flagError struct{ error }

// parseFlags parses args into fs, returning flag.ErrHelp for -h and a
// flagError for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return flagError{err}
	}
	return err
}

func cmdVersion(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: wgpio version\n\nPrints the module version, the VCS revision and the Go version the binary\nwas built from.\n")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("version takes no arguments, got %q", fs.Arg(0))
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return flagError{err}
	}
	fmt.Println(version())
	return nil
}

// version is the module version and VCS revision the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "wgpio (unknown version)"
	}
	v := "wgpio " + bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v + " " + bi.GoVersion
}
