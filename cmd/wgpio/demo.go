//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

func cmdDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: wgpio demo [flags]

Builds a throwaway topology in network namespaces (host A, a wgpio
fast-path gateway, a stock wireguard-go gateway, host B), sends UDP both
ways through the tunnel and prints per-second counters, until Ctrl-C or
-duration; then accounts for every datagram and removes everything. While
it runs, wg show, wgpio stats and wgpio capture work on its wgpio gateway
(it prints the name). Needs root.

`)
		fs.PrintDefaults()
	}
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
	if missing := missingCaps(demoCaps); len(missing) > 0 {
		// Root without them (a container's root, capsh --drop) failed
		// at its first mount with "operation not permitted".
		return fmt.Errorf("demo: runs as root but without %s; run it where root has its capabilities (sudo on the host, a privileged container)", strings.Join(missing, ", "))
	}
	// Each ends the demo, which then removes what it made: Ctrl-C,
	// SIGTERM, the terminal closing (SIGHUP), and its output's reader
	// going away (`wgpio demo | head`, quitting less), which killed it
	// with the namespaces, veths and routes left behind.
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	// SIGPIPE asked for (and dropped: the channel is never read), a
	// write to a stdout whose reader went away fails with EPIPE instead
	// of killing the process (os/signal: "SIGPIPE"), and out ends the
	// demo on it. SIGPIPE itself does not say whose pipe broke: once
	// asked for, it comes for a write to any broken socket too, such as
	// the capture socket after a `wgpio capture -c N` hung up, which
	// ended the demo when SIGPIPE ended it.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	out := epipeWriter{w: os.Stdout, gone: cancel}
	started := func(s *twosite.Site) func() {
		// The demo's wgpio gateway answers `wgpio stats` and `wgpio
		// capture` like one run by `wgpio up`.
		name := s.GwName
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil
		}
		stopStats, err := serveStats(slog.New(slog.DiscardHandler), name, func() any { st := statsOf(s.Gateway); st.Name = name; return st })
		if err != nil {
			return nil
		}
		stopCapture, err := serveCapture(name, s.Gateway.Engine(), slog.New(slog.DiscardHandler))
		if err != nil {
			return stopStats
		}
		return func() { stopCapture(); stopStats() }
	}
	res, err := runDemo(ctx, demoOptions{Duration: *dur, Rate: *rate, Size: *size, Queues: *queues, Started: started}, out)
	if err != nil {
		return err
	}
	// Stopped by a signal (Ctrl-C, `| head`), before the first handshake
	// or later, the demo ends normally whatever came through.
	if ctx.Err() == nil && (res.ReceivedAB == 0 || res.ReceivedBA == 0) {
		return fmt.Errorf("demo: no traffic came through in one direction (A→B %d, B→A %d); the wgpio gateway's drops: %s",
			res.ReceivedAB, res.ReceivedBA, dropList(res.Drops))
	}
	return nil
}

// epipeWriter writes to w and calls gone when a write fails with EPIPE:
// the reader of the demo's output went away. Safe for concurrent use if w
// is; gone may be called more than once.
type epipeWriter struct {
	w    io.Writer
	gone func()
}

func (e epipeWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		e.gone()
	}
	return n, err
}

// dropList formats drops by reason as "reason N, reason N" in the
// reasons' order, or "none".
func dropList(drops map[string]uint64) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(drops)) {
		if drops[r] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, drops[r]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// demoOptions configure a demo run.
type demoOptions struct {
	// Duration of the traffic; 0 runs until ctx is done.
	Duration time.Duration
	// Rate is the offered packets per second in each direction (default
	// 20,000).
	Rate int
	// Size is the UDP payload size in bytes (default 512).
	Size int
	// Queues on the wgpio gateway (default 1).
	Queues int
	// Started, if set, is called once the site is up (e.g. to serve the
	// gateway's stats and capture sockets); the func it returns is called
	// before the site is taken down.
	Started func(s *twosite.Site) (stop func())
}

// demoResult sums up a demo run.
type demoResult struct {
	// SentAB/ReceivedAB count datagrams from hostA to hostB (through wgpio
	// then stock wireguard-go); SentBA/ReceivedBA the other way.
	SentAB, ReceivedAB, SentBA, ReceivedBA uint64
	// Namespaces lists the namespaces the demo made (all removed on return).
	Namespaces []string
	// Drops are the wgpio gateway's drops by reason at the end.
	Drops map[string]uint64
}

type demoFlow struct {
	sent, received atomic.Uint64
}

// Run builds the topology, sends UDP both ways through the tunnel, prints a
// line per second to out, and removes everything before it returns, also
// when ctx is cancelled (Ctrl-C).
func runDemo(ctx context.Context, o demoOptions, out io.Writer) (res demoResult, err error) {
	if o.Rate <= 0 {
		o.Rate = 20000
	}
	if o.Size <= 0 {
		o.Size = 512
	}
	if o.Size < 8 || o.Size > 1392 {
		return res, fmt.Errorf("demo: payload size %d not in [8, 1392] (the tunnel MTU is 1420)", o.Size)
	}
	tp := topo.New("wgd")
	defer func() {
		if cerr := tp.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("demo: clean up: %w", cerr))
		}
	}()
	fmt.Fprintln(out, "building namespaces: hostA ── wgpio fast path ══ stock wireguard-go ── hostB")
	s, err := twosite.Build(tp, twosite.Config{Queues: o.Queues})
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	defer s.Close()
	for _, ns := range []*topo.NS{s.HostA, s.GwA, s.GwB, s.HostB} {
		res.Namespaces = append(res.Namespaces, ns.Name)
	}
	if o.Started != nil {
		if stop := o.Started(s); stop != nil {
			defer stop()
		}
	}
	wan, lan := s.Gateway.Ports()
	fmt.Fprintf(out, "wgpio gateway %s in %s: WAN %s, LAN %s; stock wireguard-go %s in %s\n",
		s.GwName, s.GwA.Name, wan.Name(), lan.Name(), s.StockName, s.GwB.Name)
	fmt.Fprintf(out, "watch it from another shell while it runs:\n"+
		"  wg show %s                  (wg: apt-get install --no-install-recommends wireguard-tools)\n"+
		"  wgpio stats %s              (from the source tree: go run ./cmd/wgpio stats %s)\n"+
		"  ip netns exec %s ping %s   (ping: iputils-ping)\n",
		s.GwName, s.GwName, s.GwName, s.HostA.Name, twosite.HostB4)

	if err := waitHandshake(ctx, s, out); err != nil {
		if ctx.Err() != nil { // Ctrl-C before the first handshake: a normal stop
			fmt.Fprintln(out, "stopped before the first handshake; removing the namespaces")
			return res, nil
		}
		return res, err
	}
	ab, err := newDemoPath(s.HostA, s.HostB, twosite.HostA4.String(), twosite.HostB4.String())
	if err != nil {
		return res, err
	}
	defer ab.close()
	ba, err := newDemoPath(s.HostB, s.HostA, twosite.HostB4.String(), twosite.HostA4.String())
	if err != nil {
		return res, err
	}
	defer ba.close()

	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	// The ledger's starting point: the kernel's drop counters and wgpio's
	// (waitHandshake's datagram is not the traffic's).
	// By role, so that the ledger names where a drop was, not a random
	// namespace name; on veth the kernel counts wgpio's port losses (an
	// AF_XDP ring with no room) again at its links.
	nss := []demoNS{{"host A", s.HostA}, {"wgpio's namespace (its port losses again)", s.GwA},
		{"the stock peer's namespace", s.GwB}, {"host B", s.HostB}}
	kernel0, err := readKernelDrops(nss)
	if err != nil {
		return res, err
	}
	qs0 := s.Gateway.Engine().Stats()
	enc0, dec0 := sealedOpened(qs0)
	drops0 := fastpath.TotalDrops(qs0)
	var senders, receivers sync.WaitGroup
	for _, p := range []*demoPath{ab, ba} {
		receivers.Add(1)
		senders.Add(1)
		go func() { defer receivers.Done(); p.receive() }()
		go func() { defer senders.Done(); p.send(ctx, o.Rate, o.Size) }()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastEnc, lastDec := enc0, dec0
	var lastAB, lastBA uint64
	fmt.Fprintln(out, "time   A→B sent/s  A→B recv/s  B→A sent/s  B→A recv/s  encrypted/s  decrypted/s  handshake  wgpio drops and port losses (total)")
	start := time.Now()
	var prevSentAB, prevSentBA uint64
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		qs := s.Gateway.Engine().Stats()
		enc, dec := sealedOpened(qs)
		rab, rba := ab.f.received.Load(), ba.f.received.Load()
		sab, sba := ab.f.sent.Load(), ba.f.sent.Load()
		hs := "none"
		for _, p := range s.Gateway.Device().PeerStates(nil) {
			if !p.LastHandshake.IsZero() {
				hs = fmt.Sprintf("%.0fs ago", time.Since(p.LastHandshake).Seconds())
			}
		}
		fmt.Fprintf(out, "%4.0fs  %10d  %10d  %10d  %10d  %11d  %11d  %9s  %s\n",
			time.Since(start).Seconds(), sab-prevSentAB, rab-lastAB, sba-prevSentBA, rba-lastBA,
			enc-lastEnc, dec-lastDec, hs, demoDrops(fastpath.TotalDrops(qs), s.Gateway))
		prevSentAB, prevSentBA, lastAB, lastBA, lastEnc, lastDec = sab, sba, rab, rba, enc, dec
	}
	// The senders stop; what is in flight is counted before the
	// receivers close.
	senders.Wait()
	drain(100*time.Millisecond, 2*time.Second, func() uint64 { return ab.f.received.Load() + ba.f.received.Load() })
	ab.close()
	ba.close()
	receivers.Wait()
	res.SentAB, res.ReceivedAB = ab.f.sent.Load(), ab.f.received.Load()
	res.SentBA, res.ReceivedBA = ba.f.sent.Load(), ba.f.received.Load()
	res.Drops = make(map[string]uint64)
	qs := s.Gateway.Engine().Stats()
	drops1 := fastpath.TotalDrops(qs)
	for r, n := range drops1 {
		if n > 0 {
			res.Drops[fastpath.DropReason(r).String()] = n
		}
	}
	kernel1, err := readKernelDrops(nss)
	if err != nil {
		return res, err
	}
	enc, dec := sealedOpened(qs)
	l := demoLedger{
		sentAB: res.SentAB, encrypted: enc - enc0, receivedAB: res.ReceivedAB,
		sentBA: res.SentBA, decrypted: dec - dec0, receivedBA: res.ReceivedBA,
		wgpio: demoDrops(drops1, s.Gateway),
	}
	l.workerDrops = sub(drops1.Total(), drops0.Total())
	l.kernel, l.kernelDetail = kernel1.since(kernel0)
	l.write(out)
	fmt.Fprintf(out, "total: A→B %d sent, %d received; B→A %d sent, %d received; removing the namespaces %s\n",
		res.SentAB, res.ReceivedAB, res.SentBA, res.ReceivedBA, strings.Join(res.Namespaces, " "))
	return res, nil
}

// waitHandshake sends one datagram from hostA to hostB's discard port and
// waits until the wgpio gateway has a session with its peer. Traffic
// offered before the first handshake completes waits in the gateway
// (fastpath.MaxHeldPerPeer packets per peer, as wireguard-go and the kernel
// hold); at the demo's rates more would arrive in the few milliseconds a
// handshake takes, and the oldest would be dropped as held_overflow.
func waitHandshake(ctx context.Context, s *twosite.Site, out io.Writer) error {
	var c *net.UDPConn
	if err := s.HostA.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP(twosite.HostB4.AsSlice()), Port: 9})
		return err
	}); err != nil {
		return fmt.Errorf("demo: probe socket in %s: %w", s.HostA.Name, err)
	}
	defer c.Close()
	start := time.Now()
	const timeout = 10 * time.Second
	for i := 0; ; i++ {
		for _, p := range s.Gateway.Device().PeerStates(nil) {
			if !p.LastHandshake.IsZero() {
				fmt.Fprintf(out, "handshake with the stock peer done in %v; starting the traffic\n", time.Since(start).Round(time.Millisecond))
				return nil
			}
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("demo: no handshake between the gateways within %v", timeout)
		}
		if i%100 == 0 { // once a second: the first may be held, not lost
			if _, err := c.Write([]byte("wgpio demo: handshake probe")); err != nil {
				return fmt.Errorf("demo: send the handshake probe: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// demoDrops lists the engine's drops by reason and the losses of the
// gateway's two ports (AF_XDP: frames the kernel could not hand over).
func demoDrops(d fastpath.DropCounts, g *fastgw.Gateway) string {
	parts := d.List()
	for _, l := range g.Device().Stats().Losses() {
		parts = append(parts, "control:"+l)
	}
	wan, lan := g.Ports()
	for _, p := range []struct {
		name string
		port dataplane.Port
	}{{"wan", wan}, {"lan", lan}} {
		for _, l := range p.port.Stats().Losses() {
			parts = append(parts, p.name+":"+l)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// sealedOpened sums the transport data packets the queues encrypted and
// decrypted.
func sealedOpened(qs []fastpath.QueueStats) (enc, dec uint64) {
	for _, q := range qs {
		enc += q.Encrypted
		dec += q.Decrypted
	}
	return enc, dec
}

// demoPath is one direction of UDP traffic: a socket in the source namespace
// and one in the destination namespace.
type demoPath struct {
	src, dst *net.UDPConn
	f        demoFlow
	once     sync.Once
}

func newDemoPath(srcNS, dstNS *topo.NS, srcAddr, dstAddr string) (*demoPath, error) {
	p := &demoPath{}
	if err := dstNS.Do(func() (err error) {
		p.dst, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(dstAddr), Port: 9000})
		return err
	}); err != nil {
		return nil, fmt.Errorf("demo: receiver in %s: %w", dstNS.Name, err)
	}
	if err := srcNS.Do(func() (err error) {
		p.src, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(srcAddr)}, &net.UDPAddr{IP: net.ParseIP(dstAddr), Port: 9000})
		return err
	}); err != nil {
		p.dst.Close()
		return nil, fmt.Errorf("demo: sender in %s: %w", srcNS.Name, err)
	}
	p.dst.SetReadBuffer(4 << 20)
	return p, nil
}

func (p *demoPath) close() {
	p.once.Do(func() {
		p.src.Close()
		p.dst.Close()
	})
}

// send offers rate datagrams per second in bursts every millisecond.
func (p *demoPath) send(ctx context.Context, rate, size int) {
	buf := make([]byte, size)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start := time.Now()
	// A sender that fell behind (not scheduled for a while on a loaded
	// machine) makes up at most 10 ms of its rate at once, not every
	// tick it missed: the offered rate stays the one asked for, where a
	// whole missed second sent at once offered twice -rate or more in
	// that second, and what the ports then lost said nothing of -rate.
	lag := uint64(max(rate/100, 1))
	var seq, offered uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := uint64(time.Since(start).Seconds() * float64(rate))
		if due > offered+lag {
			offered = due - lag
		}
		for ; offered < due; offered++ {
			binary.BigEndian.PutUint64(buf, seq)
			if _, err := p.src.Write(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// ENOBUFS/ECONNREFUSED: counted as sent, lost.
			}
			seq++
			p.f.sent.Add(1)
		}
	}
}

func (p *demoPath) receive() {
	buf := make([]byte, 2048)
	for {
		n, err := p.dst.Read(buf)
		if err != nil {
			return
		}
		if n >= 8 {
			p.f.received.Add(1)
		}
	}
}
