//go:build linux

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// cmdStrip prints the wg(8) part of a configuration file (config.File.WG)
// on standard output, as `wg-quick strip` does for a wg-quick file, whose
// output wg(8) cannot take from a wgpio file: it keeps the [WGPIO]
// section. The output holds the private key.
func cmdStrip(args []string) error { return strip(os.Stdout, args) }

func strip(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("strip", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: wgpio strip FILE\n\n"+
			"Prints the keys of FILE that wg(8) takes (PrivateKey, ListenPort, FwMark and\n"+
			"the peers), without Address, MTU, the other wg-quick keys and [WGPIO], so that\n"+
			"an edited file applies to a running gateway:\n\n"+
			"  wg syncconf wg0 <(wgpio strip /etc/wgpio/wg0.conf)\n\n"+
			"The output holds the private key.\n")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		err := fmt.Errorf("strip takes one configuration file, got %d arguments", fs.NArg())
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return flagError{err}
	}
	f, err := loadConfig(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Interface.PrivateKey.Zero()
	_, err = w.Write(f.WG())
	return err
}
