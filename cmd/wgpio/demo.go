package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/wgpio/wgpio/internal/demo"
)

func cmdDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dur := fs.Duration("duration", 0, "stop after this long (default: run until Ctrl-C)")
	rate := fs.Int("rate", 20000, "offered UDP packets per second in each direction")
	size := fs.Int("size", 512, "UDP payload size in bytes (8 to 1392)")
	queues := fs.Int("queues", 1, "queues on the wgpio gateway's interfaces")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("demo: unexpected argument %q (it takes flags only; see wgpio demo -h)", fs.Arg(0))
	case *dur < 0:
		return fmt.Errorf("demo: -duration %v: want 0 (until Ctrl-C) or a positive duration", *dur)
	case *rate <= 0:
		return fmt.Errorf("demo: -rate %d: want packets per second, 1 or more", *rate)
	case *size < 8 || *size > 1392:
		return fmt.Errorf("demo: -size %d: want 8 to 1392 bytes", *size)
	case *queues < 1 || *queues > maxFastQueues:
		return fmt.Errorf("demo: -queues %d: want 1 to %d", *queues, maxFastQueues)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("demo: needs root: it creates network namespaces, veth pairs and XDP programs (run: sudo go run ./cmd/wgpio demo)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := func(s *demo.Site) func() {
		// The demo's wgpio gateway answers `wgpio stats` and `wgpio
		// capture` like one run by `wgpio up`.
		name := s.GwName
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil
		}
		stopStats, err := serveStats(name, func() any { st := statsOf(s.Gateway); st.Name = name; return st })
		if err != nil {
			return nil
		}
		stopCapture, err := serveCapture(name, s.Gateway.Engine(), slog.New(slog.DiscardHandler))
		if err != nil {
			return stopStats
		}
		return func() { stopCapture(); stopStats() }
	}
	res, err := demo.Run(ctx, demo.Options{Duration: *dur, Rate: *rate, Size: *size, Queues: *queues, Started: started}, os.Stdout)
	if err != nil {
		return err
	}
	if res.ReceivedAB == 0 || res.ReceivedBA == 0 {
		return fmt.Errorf("demo: no traffic came through in one direction (A→B %d, B→A %d); drops %v", res.ReceivedAB, res.ReceivedBA, res.Drops)
	}
	return nil
}
