//go:build linux

package rig

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wgpio/wgpio/bench/internal/gen"
	"github.com/wgpio/wgpio/bench/internal/gwproc"
	"github.com/wgpio/wgpio/bench/internal/sink"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/topo"
	"golang.org/x/crypto/curve25519"
	"golang.org/x/sys/unix"
)

// Addresses of the rig (see the package doc).
const (
	srcAddr     = "198.18.1.2"
	gw1LANAddr  = "198.18.1.1"
	gw1WANAddr  = "198.18.2.1"
	gw2WANAddr  = "198.18.2.2"
	gw2LANAddr  = "198.18.3.1"
	sinkAddr    = "198.18.3.2"
	srcNet      = "198.18.1.0/24"
	sinkNet     = "198.18.3.0/24"
	gw1Tunnel   = "198.19.0.1"
	gw2Tunnel   = "198.19.0.2"
	listenPort  = 51820
	udpPort     = 9000
	tcpPort     = 5201
	tunnelMTU   = 1420
	genSrcPort  = 10000
	defaultFlow = 64
)

// Values of Options.Peer.
const (
	PeerStock = "stock"
	PeerSame  = "same"
)

// Options configure a run. The zero value is not usable; start from
// DefaultOptions.
type Options struct {
	Quick       bool
	Configs     []string      // kind names; empty = all
	Sizes       []int         // IPv4 packet lengths in bytes
	Rates       []float64     // offered rates, packets/s, ascending
	Queues      int           // veth queues (and generator TX queues)
	Duration    time.Duration // per offered-load step
	Refine      int           // bisection steps between the clean and the first lossy rate
	Repeat      int           // sweeps per size; the report gives medians
	Profile     bool          // record gateway 1 with perf at the first size's clean rate
	TCPDuration time.Duration // the TCP stream
	Flows       int           // inner UDP flows
	CPUs        string        // CPU list for every gateway process (taskset -c)
	GOMAXPROCS  int           // for every gateway process
	Out         string        // results folder (default <module root>/bench/results/<UTC timestamp>)
	// ReadyTimeout is how long a configuration may take until a ping
	// crosses the tunnel (default 20 s).
	ReadyTimeout time.Duration
	// Timeout bounds the run from the moment the binaries are built (0 =
	// only ctx bounds it): the go toolchain's build of two binaries takes
	// minutes on a loaded machine, which says nothing about the rig. When
	// it runs out, Run stops as on a cancelled ctx and returns
	// context.DeadlineExceeded.
	Timeout time.Duration
	// Peer is what gateway 2 runs: PeerStock (stock wireguard-go on a
	// kernel TUN; the zero value) or PeerSame (the configuration under test,
	// the bench command's default,
	// so that the peer does not cap what the tunnel delivers).
	Peer     string
	Progress io.Writer // progress lines (nil = none)
	Command  string    // the command line, for the report
}

// DefaultOptions returns the full run's options, or the quick run's.
func DefaultOptions(quick bool) Options {
	o := Options{
		Quick:       quick,
		Sizes:       []int{64, 512, 1420},
		Rates:       []float64{10e3, 25e3, 50e3, 100e3, 150e3, 200e3, 300e3, 400e3, 600e3, 800e3, 1.2e6, 1.6e6},
		Refine:      2,
		Repeat:      3,
		Queues:      2,
		Duration:    1500 * time.Millisecond,
		TCPDuration: 10 * time.Second,
		Flows:       defaultFlow,
		CPUs:        allowedCPUs(),
		GOMAXPROCS:  runtime.NumCPU(),
	}
	if quick {
		o.Sizes = []int{64, 1420}
		o.Rates = []float64{50e3, 100e3, 200e3, 400e3}
		o.Duration = 800 * time.Millisecond
		o.Refine = 1
		o.Repeat = 1
		o.TCPDuration = 2 * time.Second
	}
	return o
}

// rig is one run's state.
type rig struct {
	o        Options
	t        *topo.Topology
	src, gw1 *topo.NS
	gw2, snk *topo.NS
	lan1     *topo.Veth // src (A) — gw1 (B)
	wan      *topo.Veth // gw1 (A) — gw2 (B)
	lan2     *topo.Veth // gw2 (A) — sink (B)
	genPort  *afxdp.Port
	udp      *sink.UDP
	tcp      *sink.TCPServer
	bins     map[string]string
	missing  map[string]string
	dir      string // temp dir: binaries, configs, logs
	procs    []*gwproc.Proc
	run      uint32
	gw1MAC   net.HardwareAddr
	gwQueues int // queues gateway 1 serves in the current configuration
}

func (r *rig) progress(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// Run runs the rig and writes the report into o.Out. Everything it makes
// (namespaces, veths, processes, XDP programs, temp files) is removed
// before it returns, also when ctx is cancelled (Ctrl-C) or on panic.
func Run(ctx context.Context, o Options) (res *Results, err error) {
	if len(o.Sizes) == 0 || len(o.Rates) == 0 || o.Queues < 1 || o.Duration <= 0 {
		return nil, errors.New("rig: sizes, rates, queues and duration must be set")
	}
	switch o.Peer {
	case "":
		o.Peer = PeerStock
	case PeerStock, PeerSame:
	default:
		return nil, fmt.Errorf("rig: peer %q, want %s or %s", o.Peer, PeerStock, PeerSame)
	}
	for _, s := range o.Sizes {
		if s < gen.MinSize || s > tunnelMTU {
			return nil, fmt.Errorf("rig: packet size %d, want %d to %d bytes", s, gen.MinSize, tunnelMTU)
		}
	}
	kinds := Kinds(o.Queues)
	if len(o.Configs) > 0 {
		var sel []Kind
		for _, name := range o.Configs {
			i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("rig: unknown configuration %q (have %s)", name, kindNames(kinds))
			}
			sel = append(sel, kinds[i])
		}
		kinds = sel
	}
	if o.Out == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		o.Out = filepath.Join(root, "bench", "results", time.Now().UTC().Format("20060102-150405"))
	}
	r := &rig{o: o}
	if r.dir, err = os.MkdirTemp("", "wgpio-bench-"); err != nil {
		return nil, fmt.Errorf("rig: temp dir: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			r.close()
			panic(p)
		}
		if cerr := r.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	res = &Results{Machine: ThisMachine(o.Command), Options: o.public()}
	if r.bins, r.missing, err = buildBinaries(r.dir, r.progress); err != nil {
		return nil, err
	}
	if _, ok := r.bins["wggw"]; !ok {
		return nil, fmt.Errorf("rig: reference gateway: %s", r.missing["wggw"])
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	r.progress("building topology (%d veth queues)", o.Queues)
	err = r.build()
	if r.t != nil {
		for _, ns := range []*topo.NS{r.src, r.gw1, r.gw2, r.snk} {
			if ns != nil {
				res.Namespaces = append(res.Namespaces, ns.Name)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rig: build topology: %w", err)
	}
	for _, k := range kinds {
		if ctx.Err() != nil {
			break
		}
		cr := ConfigResult{Name: k.Name, Desc: k.Desc}
		switch {
		case r.missing[k.Binary] != "":
			cr.Skipped = r.missing[k.Binary]
		case o.Queues < k.MinQueues:
			cr.Skipped = fmt.Sprintf("needs -queues %d or more", k.MinQueues)
		}
		if cr.Skipped != "" {
			r.progress("%s: skipped: %s", k.Name, cr.Skipped)
			res.Configs = append(res.Configs, cr)
			continue
		}
		if err := r.runKind(ctx, k, &cr); err != nil {
			if strings.Contains(err.Error(), "not available in this build") {
				// wgpio built, but without this mode yet.
				cr.Skipped = "mode not available in this wgpio build: " + err.Error()
				r.progress("%s: skipped: %v", k.Name, err)
			} else {
				cr.Error = err.Error()
				r.progress("%s: error: %v", k.Name, err)
			}
		}
		res.Configs = append(res.Configs, cr)
	}
	res.Finished = time.Now().UTC()
	if ctx.Err() != nil {
		res.Interrupted = true
	}
	if err := res.Write(o.Out); err != nil {
		return res, err
	}
	r.progress("results in %s", o.Out)
	res.Out = o.Out
	return res, ctx.Err()
}

func kindNames(ks []Kind) string {
	var n []string
	for _, k := range ks {
		n = append(n, k.Name)
	}
	return strings.Join(n, ", ")
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// close removes everything, newest first.
func (r *rig) close() error {
	var errs []error
	r.stopProcs()
	if r.udp != nil {
		errs = append(errs, r.udp.Close())
	}
	if r.tcp != nil {
		errs = append(errs, r.tcp.Close())
	}
	if r.genPort != nil {
		errs = append(errs, r.genPort.Close())
	}
	if r.t != nil {
		errs = append(errs, r.t.Close())
	}
	if r.dir != "" {
		errs = append(errs, os.RemoveAll(r.dir))
	}
	return errors.Join(errs...)
}

func (r *rig) stopProcs() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].Stop()
	}
	r.procs = nil
}

// build makes the namespaces, veths, addresses and routes, opens the
// generator's AF_XDP port and the sink's sockets.
func (r *rig) build() (err error) {
	r.t = topo.New("bench")
	if r.src, err = r.t.NewNS("s"); err != nil {
		return err
	}
	if r.gw1, err = r.t.NewNS("g"); err != nil {
		return err
	}
	if r.gw2, err = r.t.NewNS("h"); err != nil {
		return err
	}
	if r.snk, err = r.t.NewNS("k"); err != nil {
		return err
	}
	vc := topo.VethConfig{Queues: r.o.Queues}
	if r.lan1, err = r.t.NewVeth(r.src, r.gw1, vc); err != nil {
		return err
	}
	if r.wan, err = r.t.NewVeth(r.gw1, r.gw2, vc); err != nil {
		return err
	}
	if r.lan2, err = r.t.NewVeth(r.gw2, r.snk, vc); err != nil {
		return err
	}
	steps := []struct {
		ns        *topo.NS
		dev, cidr string
	}{
		{r.src, r.lan1.A, srcAddr + "/24"},
		{r.gw1, r.lan1.B, gw1LANAddr + "/24"},
		{r.gw1, r.wan.A, gw1WANAddr + "/24"},
		{r.gw2, r.wan.B, gw2WANAddr + "/24"},
		{r.gw2, r.lan2.A, gw2LANAddr + "/24"},
		{r.snk, r.lan2.B, sinkAddr + "/24"},
	}
	for _, s := range steps {
		if err := s.ns.AddAddr(s.dev, s.cidr); err != nil {
			return err
		}
	}
	if err := r.src.AddRoute(sinkNet, gw1LANAddr, r.lan1.A); err != nil {
		return err
	}
	if err := r.snk.AddRoute(srcNet, gw2LANAddr, r.lan2.B); err != nil {
		return err
	}
	for _, ns := range []*topo.NS{r.gw1, r.gw2} {
		if err := ns.Forwarding(); err != nil {
			return err
		}
	}
	if r.gw1MAC, err = r.gw1.LinkMAC(r.lan1.B); err != nil {
		return err
	}
	// The generator: AF_XDP on the source host's veth, transmit only (the
	// filter redirects nothing, so the host's own traffic is untouched).
	err = r.src.Do(func() error {
		p, err := afxdp.Open(r.lan1.A, afxdp.Config{Queues: r.o.Queues})
		r.genPort = p
		return err
	})
	if err != nil {
		return fmt.Errorf("open generator port: %w", err)
	}
	udpAddr := netip.AddrPortFrom(netip.MustParseAddr(sinkAddr), udpPort)
	return r.snk.Do(func() error {
		var err error
		if r.udp, err = sink.ListenUDP(udpAddr); err != nil {
			return err
		}
		r.tcp, err = sink.ListenTCP(net.JoinHostPort(sinkAddr, strconv.Itoa(tcpPort)))
		return err
	})
}

func newKey() (priv, pub [32]byte, err error) {
	if _, err = rand.Read(priv[:]); err != nil {
		return
	}
	// Clamping as in Curve25519 (RFC 7748 section 5), as wg genkey does.
	priv[0] &= 248
	priv[31] = priv[31]&127 | 64
	p, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	copy(pub[:], p)
	return
}

// startGateways starts gw2 (always stock wireguard-go, kernel TUN) and gw1
// (kind k) and waits until a ping crosses the tunnel.
func (r *rig) startGateways(ctx context.Context, k Kind) error {
	k1, p1, err := newKey()
	if err != nil {
		return err
	}
	k2, p2, err := newKey()
	if err != nil {
		return err
	}
	g1 := Gateway{
		Name: "gw1", LAN: r.lan1.B, WAN: r.wan.A, TUN: topo.UniqueName("bench1"),
		PrivateKey: k1, PeerPublic: p2, ListenPort: listenPort,
		Endpoint: net.JoinHostPort(gw2WANAddr, strconv.Itoa(listenPort)), TunnelAddr: gw1Tunnel + "/30",
		AllowedIPs: []string{sinkNet, gw2Tunnel + "/32"}, MTU: tunnelMTU, Queues: r.o.Queues, CPUs: r.o.CPUs,
	}
	g2 := Gateway{
		Name: "gw2", LAN: r.lan2.A, WAN: r.wan.B, TUN: topo.UniqueName("bench2"),
		PrivateKey: k2, PeerPublic: p1, ListenPort: listenPort,
		Endpoint: net.JoinHostPort(gw1WANAddr, strconv.Itoa(listenPort)), TunnelAddr: gw2Tunnel + "/30",
		AllowedIPs: []string{srcNet, gw1Tunnel + "/32"}, MTU: tunnelMTU, Queues: r.o.Queues, CPUs: r.o.CPUs,
	}
	peer := Kinds(r.o.Queues)[0]
	if r.o.Peer == PeerSame {
		peer = k
	}
	if err := r.startOne(peer, g2, r.gw2); err != nil {
		return err
	}
	if err := r.startOne(k, g1, r.gw1); err != nil {
		return err
	}
	// The first packets start the handshake; wait until one gets through.
	wait := r.o.ReadyTimeout
	if wait <= 0 {
		wait = 20 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		if _, err := r.src.Run("ping", "-c", "1", "-W", "1", sinkAddr); err == nil {
			return nil
		}
		for _, p := range r.procs {
			if done, err := p.Exited(); done {
				return fmt.Errorf("%s exited (%v): %s", p.Name, err, p.Log())
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			var logs []string
			for _, p := range r.procs {
				logs = append(logs, p.Name+": "+p.Log())
			}
			return fmt.Errorf("no ping through the tunnel after %v; logs: %s", wait, strings.Join(logs, " | "))
		}
	}
}

// startOne starts gateway g of kind k in ns under the common CPU set and
// GOMAXPROCS.
func (r *rig) startOne(k Kind, g Gateway, ns *topo.NS) error {
	args, err := k.Command(g, r.dir)
	if err != nil {
		return err
	}
	bin := r.bins[k.Binary]
	var cmd = ns.Command(bin, args...)
	if r.o.CPUs != "" {
		cmd = ns.Command("taskset", append([]string{"-c", r.o.CPUs, bin}, args...)...)
	}
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(r.o.GOMAXPROCS))
	p, err := gwproc.Start(g.Name+"/"+k.Name, cmd, filepath.Join(r.dir, g.Name+"-"+k.Name+".log"))
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	if k.Binary == "wggw" {
		if err := p.WaitLog("ready", 10*time.Second); err != nil {
			return err
		}
	}
	if !k.KernelRoutes {
		return nil
	}
	if _, err := ns.Run("ip", "link", "set", g.TUN, "up"); err != nil {
		return err
	}
	if err := ns.AddAddr(g.TUN, g.TunnelAddr); err != nil {
		return err
	}
	far := sinkNet
	if g.Name == "gw2" {
		far = srcNet
	}
	return ns.AddRoute(far, "", g.TUN)
}

// allowedCPUs is the CPU list this process may run on (its affinity mask,
// which a container's cpuset may cut), as taskset -c takes it: "0-1,4".
func allowedCPUs() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "0-" + strconv.Itoa(runtime.NumCPU()-1)
	}
	var parts []string
	for lo := 0; lo < 1024; lo++ {
		if !set.IsSet(lo) {
			continue
		}
		hi := lo
		for hi+1 < 1024 && set.IsSet(hi+1) {
			hi++
		}
		if hi == lo {
			parts = append(parts, strconv.Itoa(lo))
		} else {
			parts = append(parts, strconv.Itoa(lo)+"-"+strconv.Itoa(hi))
		}
		lo = hi
	}
	return strings.Join(parts, ",")
}
