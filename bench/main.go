//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wgpio/wgpio/bench/internal/rig"
)

func main() {
	quick := flag.Bool("quick", false, "short run (under 2 minutes): sizes 64,1420, four rates, 0.8 s steps, one sweep, 2 s TCP")
	configs := flag.String("configs", "", "comma-separated configurations (default all: "+names()+")")
	sizes := flag.String("sizes", "", "comma-separated IPv4 packet sizes in bytes (default 64,512,1420; quick 64,1420)")
	rates := flag.String("rates", "", "comma-separated offered rates in packets/s (e.g. 50k,100k,1M)")
	queues := flag.Int("queues", 2, "veth queues (and generator TX queues)")
	duration := flag.Duration("duration", 0, "length of one offered-load step (default 1.5s; quick 0.8s)")
	profile := flag.Bool("profile", false, "record gateway 1 with perf(1) at the first size's clean rate; writes profile-<config>-<size>.txt")
	repeat := flag.Int("repeat", 0, "sweeps per configuration and size; the report gives medians (default 3; quick 1)")
	tcp := flag.Duration("tcp", 0, "length of the TCP stream (default 10s; quick 2s)")
	cpus := flag.String("cpus", "", "CPU list for every gateway process, as taskset -c (default all); with -inprocess, the CPU counts to pin the process to (default 1,2)")
	procs := flag.Int("gomaxprocs", 0, "GOMAXPROCS of every gateway process (default the CPU count)")
	peer := flag.String("peer", rig.PeerSame, "what gateway 2 runs: same (the configuration under test, the default: the tunnel as a user of that configuration runs it) or stock (wireguard-go on a kernel TUN: interop, capped by stock wireguard-go)")
	out := flag.String("out", "", "results folder (default bench/results/<UTC timestamp>)")
	closed := flag.Bool("closed", false, "with -inprocess: closed-loop rounds only (no paced sweep); with -repeat N, N rounds taking the configurations in turn, and each configuration's CPU per packet over stock's in the same round: the side by side for a noisy machine; rounds of 3 s unless -duration is given")
	inprocess := flag.Bool("inprocess", false, "measure in one process without the kernel (stock wireguard-go over in-memory doubles, compat and the fast path over memport) instead of the namespace rig; honours -quick, -configs, -sizes, -duration, -repeat (closed-loop rounds, taken in turn over the configurations), -closed, -out and -cpus (CPU counts, e.g. 1,2); needs no root")
	flag.Parse()
	if *inprocess {
		runInProcess(*quick, *configs, *sizes, *cpus, *duration, *repeat, *closed, *out)
		return
	}

	o := rig.DefaultOptions(*quick)
	o.Progress = os.Stderr
	o.Command = strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " ")
	o.Queues = *queues
	o.Peer = *peer
	if *configs != "" {
		o.Configs = strings.Split(*configs, ",")
	}
	if *sizes != "" {
		o.Sizes = nil
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				fatal(fmt.Errorf("-sizes: %w", err))
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	if *rates != "" {
		o.Rates = nil
		for _, s := range strings.Split(*rates, ",") {
			v, err := parseRate(s)
			if err != nil {
				fatal(fmt.Errorf("-rates: %w", err))
			}
			o.Rates = append(o.Rates, v)
		}
	}
	if *duration > 0 {
		o.Duration = *duration
	}
	o.Profile = *profile
	if *repeat > 0 {
		o.Repeat = *repeat
	}
	if *tcp > 0 {
		o.TCPDuration = *tcp
	}
	if *cpus != "" {
		o.CPUs = *cpus
	}
	if *procs > 0 {
		o.GOMAXPROCS = *procs
	}
	if *out != "" {
		o.Out = *out
	}
	if os.Geteuid() != 0 {
		fatal(fmt.Errorf("must run as root: it creates network namespaces and AF_XDP sockets"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := rig.Run(ctx, o)
	if res != nil {
		fmt.Print(res.Markdown())
	}
	if err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "done in %v; results in %s\n", time.Since(start).Round(time.Second), res.Out)
}

func names() string {
	var n []string
	for _, k := range rig.Kinds(2) {
		n = append(n, k.Name)
	}
	return strings.Join(n, ",")
}

// parseRate reads "50000", "50k" or "1.5M".
func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	mul := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mul, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mul, s = 1e6, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	return v * mul, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
