//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wgpio/wgpio/bench/internal/inproc"
	"github.com/wgpio/wgpio/bench/internal/rig"
)

// closedRound is a closed-loop round's length with -closed (the side by
// side) unless -duration says otherwise.
const closedRound = 3 * time.Second

// runInProcess is `go run ./bench -inprocess`.
func runInProcess(quick bool, configs, sizes, cpus string, duration time.Duration, rounds int, closed bool, out string) {
	o := inproc.DefaultOptions(quick)
	o.Progress = os.Stderr
	o.Command = strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " ")
	if configs != "" {
		o.Configs = strings.Split(configs, ",")
	}
	var err error
	if sizes != "" {
		if o.Sizes, err = ints(sizes); err != nil {
			fatal(fmt.Errorf("-sizes: %w", err))
		}
	}
	if cpus != "" {
		if o.CPUs, err = ints(cpus); err != nil {
			fatal(fmt.Errorf("-cpus: %w", err))
		}
	}
	if duration > 0 {
		o.Duration = duration
	} else if closed && !quick {
		// The side by side: on a 2-core VM rounds of 1 s left compat's
		// paired median anywhere from 0.91 to 1.43 over four runs, rounds
		// of 3 s 1.01-1.09 over five (bench/README.md).
		o.Duration = closedRound
	}
	if rounds > 0 {
		o.Rounds = rounds
	}
	o.ClosedOnly = closed
	o.Out = out
	if o.Out == "" {
		root, err := rig.ModuleRoot()
		if err != nil {
			fatal(err)
		}
		o.Out = filepath.Join(root, "bench", "results", time.Now().UTC().Format("20060102-150405")+"-inprocess")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := inproc.Run(ctx, o)
	if res != nil {
		fmt.Print(res.Markdown())
	}
	if err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "done in %v; results in %s\n", time.Since(start).Round(time.Second), res.Out)
}

// ints reads "1,2,3".
func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
