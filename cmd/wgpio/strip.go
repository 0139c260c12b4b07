//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// stripFailed is what strip prints on standard output when it fails: a
// line wg(8) refuses ("Line unrecognized"), so that a configuration
// command reading strip's output fails instead of applying an empty
// configuration.
const stripFailed = "[wgpio-strip-failed]"

// cmdStrip prints the wg(8) part of a configuration file (config.File.WG)
// on standard output, as `wg-quick strip` does for a wg-quick file, whose
// output wg(8) cannot take from a wgpio file: it keeps the [WGPIO]
// section. The output holds the private key.
func cmdStrip(args []string) error { return strip(os.Stdout, args) }

func strip(w io.Writer, args []string) (err error) {
	// On any failure stdout gets one line wg(8) refuses: in the pipeline
	// the usage names (wg syncconf wg0 <(wgpio strip FILE)) the shell
	// does not see strip's exit status, and an empty configuration would
	// make syncconf remove every peer, the private key and the listen
	// port; this line makes wg fail and change nothing.
	defer func() {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(w, stripFailed)
		}
	}()
	fs := flag.NewFlagSet("strip", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: wgpio strip FILE (or -c FILE, as up and check take it)\n\n"+
			"Prints the keys of FILE that wg(8) takes (PrivateKey, ListenPort, FwMark and\n"+
			"the peers), without Address, MTU, the other wg-quick keys and [WGPIO], so that\n"+
			"an edited file applies to a running gateway:\n\n"+
			"  wg syncconf wg0 <(wgpio strip /etc/wgpio/wg0.conf)\n\n"+
			"The output holds the private key. On an error (reported on standard error)\n"+
			"it prints a line wg(8) refuses, so that the command above changes nothing.\n")
	}
	conf := fs.String("c", "", "the configuration `file` (or as the argument)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	file, n := *conf, fs.NArg()
	if file != "" {
		n++
	} else if n == 1 {
		file = fs.Arg(0)
	}
	if n != 1 {
		err := fmt.Errorf("strip takes one configuration file, got %d arguments", n)
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return flagError{err}
	}
	f, err := loadConfig(file)
	if err != nil {
		return err
	}
	defer f.Interface.PrivateKey.Zero()
	_, err = w.Write(f.WG())
	return err
}
