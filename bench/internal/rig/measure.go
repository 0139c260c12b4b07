//go:build linux

package rig

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wgpio/wgpio/bench/internal/gen"
	"github.com/wgpio/wgpio/bench/internal/gwproc"
	"github.com/wgpio/wgpio/bench/internal/sink"
	"github.com/wgpio/wgpio/internal/topo"
)

// cleanLoss is the loss below which a step is clean (1%, as in the seed
// report).
const cleanLoss = 0.01

// minRate is the lowest rate a refinement step offers, packets/s.
const minRate = 5e3

// drain is how long the sink keeps counting after the generator stops.
const drain = 300 * time.Millisecond

// runKind measures kind k: the sweep for every size, then the TCP stream.
func (r *rig) runKind(ctx context.Context, k Kind, cr *ConfigResult) error {
	r.progress("%s: starting gateways (%s)", k.Name, k.Desc)
	defer r.stopProcs()
	r.gwQueues = r.o.Queues
	if k.GWQueues > 0 {
		r.gwQueues = min(k.GWQueues, r.o.Queues)
	}
	if err := r.steer(r.gwQueues); err != nil {
		return err
	}
	defer r.steer(r.o.Queues)
	if err := r.startGateways(ctx, k); err != nil {
		return err
	}
	gw1, gw2 := r.procs[1], r.procs[0]
	for _, size := range r.o.Sizes {
		var runs []SizeResult
		for range max(r.o.Repeat, 1) {
			sr, err := r.sweep(ctx, k, size, gw1, gw2)
			if err != nil {
				return err
			}
			runs = append(runs, sr)
			if ctx.Err() != nil {
				break
			}
		}
		cr.Sizes = append(cr.Sizes, medianRun(runs))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if r.o.Profile && len(cr.Sizes) > 0 {
		path, err := r.profile(ctx, k, cr.Sizes[0], gw1, gw2)
		if err != nil {
			r.progress("%s: profile: %v", k.Name, err)
		} else {
			cr.Profile = path
		}
	}
	tr, err := r.tcpStream(ctx)
	if err != nil {
		return fmt.Errorf("tcp stream: %w", err)
	}
	cr.TCP = &tr
	r.progress("%s: tcp %.0f Mbit/s, %d retransmits, %d reorder events", k.Name, tr.Mbps, tr.Retransmits, tr.ReorderEvents)
	return nil
}

// sweep offers the rates in turn at one packet size. It stops after two
// steps in a row lose 10% or more: the peak has been passed.
func (r *rig) sweep(ctx context.Context, k Kind, size int, gw1, gw2 *gwproc.Proc) (SizeResult, error) {
	sr := SizeResult{Size: size}
	gens, err := r.generators(size)
	if err != nil {
		return sr, err
	}
	// A short warm-up (ARP, handshake state, socket buffers) that is not
	// recorded.
	r.step(ctx, gens, r.o.Rates[0], 200*time.Millisecond, gw1, gw2)
	lossy := 0
	for _, rate := range r.o.Rates {
		if ctx.Err() != nil {
			break
		}
		st, err := r.step(ctx, gens, rate, r.o.Duration, gw1, gw2)
		if err != nil {
			return sr, err
		}
		sr.Steps = append(sr.Steps, st)
		r.progress("%s: %4d B offered %8.0f pps (gen %8.0f) delivered %8.0f pps loss %5.1f%% reord %d gw1 %6.0f ns/pkt %.3f cs/pkt sink drops %d",
			k.Name, size, st.Offered, st.Achieved, st.DeliveredPPS, st.LossPct, st.Reordered, st.GW1CPUNsPerPkt, st.GW1CtxPerPkt, st.SinkDrops)
		if st.LossPct >= 10 {
			lossy++
		} else {
			lossy = 0
		}
		if lossy >= 2 {
			break
		}
	}
	// Bisect between the highest clean and the lowest lossy rate, for a
	// finer clean figure than the coarse list gives.
	for range r.o.Refine {
		lo, hi := bracket(sr.Steps)
		if ctx.Err() != nil || hi <= 0 || hi < 1.1*lo || (lo <= 0 && hi < 2*minRate) {
			break
		}
		// With no clean step yet, halve the lowest lossy rate.
		st, err := r.step(ctx, gens, (lo+hi)/2, r.o.Duration, gw1, gw2)
		if err != nil {
			return sr, err
		}
		sr.Steps = append(sr.Steps, st)
		r.progress("%s: %4d B offered %8.0f pps (gen %8.0f) delivered %8.0f pps loss %5.1f%% (refine)",
			k.Name, size, st.Offered, st.Achieved, st.DeliveredPPS, st.LossPct)
	}
	slices.SortStableFunc(sr.Steps, func(a, b Step) int { return cmp.Compare(a.Offered, b.Offered) })
	sr.summarize()
	return sr, nil
}

// bracket returns the highest offered rate with under 1% loss and the
// lowest offered rate above it that lost more (0 where there is none).
func bracket(steps []Step) (lo, hi float64) {
	for _, st := range steps {
		if st.Delivered > 0 && st.LossPct < 100*cleanLoss {
			lo = max(lo, st.Offered)
		}
	}
	for _, st := range steps {
		if st.Offered > lo && (st.Delivered == 0 || st.LossPct >= 100*cleanLoss) && (hi == 0 || st.Offered < hi) {
			hi = st.Offered
		}
	}
	return lo, hi
}

// generators makes one generator per veth queue, the flows split among them.
func (r *rig) generators(size int) ([]*gen.Generator, error) {
	q := r.gwQueues
	per := max(r.o.Flows/q, 1)
	var gs []*gen.Generator
	for i := range q {
		g, err := gen.New(gen.Config{
			SrcMAC: r.genPort.MAC(), DstMAC: r.gw1MAC,
			Src: netip.MustParseAddr(srcAddr), Dst: netip.MustParseAddr(sinkAddr),
			SrcPort: uint16(genSrcPort + i*per), DstPort: udpPort, Flows: per, FirstFlow: uint32(i * per), Size: size,
		})
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// step runs one offered-load step and measures it.
func (r *rig) step(ctx context.Context, gens []*gen.Generator, rate float64, d time.Duration, gw1, gw2 *gwproc.Proc) (Step, error) {
	r.run++
	run := r.run
	flows := 0
	for _, g := range gens {
		flows += g.Flows()
	}
	r.udp.Start(run, flows)
	snmp0, err := r.sinkSNMP()
	if err != nil {
		return Step{}, err
	}
	u10, err1 := gw1.Usage()
	u20, err2 := gw2.Usage()
	if err1 != nil || err2 != nil {
		return Step{}, fmt.Errorf("gateway died: %v %v: %s | %s", err1, err2, gw1.Log(), gw2.Log())
	}
	reps := make([]gen.Report, len(gens))
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Go(func() {
			reps[i] = g.Run(ctx, r.genPort.Queue(i).TX(), run, rate/float64(len(gens)), d)
		})
	}
	wg.Wait()
	time.Sleep(drain)
	u11, _ := gw1.Usage()
	u21, _ := gw2.Usage()
	snmp1, err := r.sinkSNMP()
	if err != nil {
		return Step{}, err
	}
	c := r.udp.Counts()
	st := Step{Offered: rate}
	var elapsed time.Duration
	for _, rep := range reps {
		st.Sent += rep.Sent
		st.GenShort += rep.Short
		elapsed = max(elapsed, rep.Elapsed)
	}
	if elapsed > 0 {
		st.Achieved = float64(st.Sent) / elapsed.Seconds()
		st.DeliveredPPS = float64(c.Received) / elapsed.Seconds()
	}
	st.Delivered = c.Received
	st.Reordered, st.Duplicates, st.Stale = c.Reordered, c.Duplicates, c.Stale
	if st.Sent > 0 && st.Sent >= c.Received {
		st.LossPct = 100 * float64(st.Sent-c.Received) / float64(st.Sent)
	}
	st.SinkDrops = snmp1.RcvbufErrors - snmp0.RcvbufErrors
	d1, d2 := u11.Sub(u10), u21.Sub(u20)
	st.GW1CPUSeconds, st.GW2CPUSeconds = d1.CPU.Seconds(), d2.CPU.Seconds()
	st.GW1CtxSwitches, st.GW2CtxSwitches = d1.CtxSwitches, d2.CtxSwitches
	if c.Received > 0 {
		n := float64(c.Received)
		st.GW1CPUNsPerPkt = float64(d1.CPU.Nanoseconds()) / n
		st.GW1SysNsPerPkt = float64(d1.System.Nanoseconds()) / n
		st.GW2CPUNsPerPkt = float64(d2.CPU.Nanoseconds()) / n
		st.GW1CtxPerPkt = float64(d1.CtxSwitches) / n
		st.GW2CtxPerPkt = float64(d2.CtxSwitches) / n
	}
	return st, nil
}

// steer makes the kernels of the source host, gateway 2 and the sink host
// transmit toward a gateway on queues 0..q-1 only, through XPS
// (Documentation/networking/scaling.rst, "XPS: Transmit Packet Steering"):
// on veth a frame arrives on the RX queue of the sender's TX queue. q equal
// to the veth's queue count turns XPS off again (the default hash).
func (r *rig) steer(q int) error {
	all := fmt.Sprintf("%x", uint64(1)<<runtime.NumCPU()-1)
	for _, e := range []struct {
		ns  *topo.NS
		dev string
	}{{r.src, r.lan1.A}, {r.gw2, r.wan.B}, {r.snk, r.lan2.B}} {
		var script strings.Builder
		for i := range r.o.Queues {
			mask := "0"
			if q < r.o.Queues && i == 0 {
				mask = all
			}
			fmt.Fprintf(&script, "echo %s > /sys/class/net/%s/queues/tx-%d/xps_cpus; ", mask, e.dev, i)
		}
		if _, err := e.ns.Run("sh", "-c", script.String()); err != nil {
			return fmt.Errorf("steer to %d queues: %w", q, err)
		}
	}
	return nil
}

func (r *rig) sinkSNMP() (sink.SNMP, error) {
	out, err := r.snk.Run("cat", "/proc/net/snmp")
	if err != nil {
		return sink.SNMP{}, err
	}
	return sink.ParseSNMP(out)
}

// tcpStream runs one TCP stream from the source host to the sink host.
func (r *rig) tcpStream(ctx context.Context) (sink.TCPResult, error) {
	var c *net.TCPConn
	err := r.src.Do(func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(sinkAddr, strconv.Itoa(tcpPort)))
		if err != nil {
			return err
		}
		c = conn.(*net.TCPConn)
		return nil
	})
	if err != nil {
		return sink.TCPResult{}, fmt.Errorf("dial: %w", err)
	}
	return sink.SendTCP(ctx, c, r.tcp, r.o.TCPDuration)
}

// medianRun returns the sweep whose clean rate is the median of runs (the
// lower middle one for an even count), with every run's clean and peak
// rates recorded and PeakPPS set to the median peak.
func medianRun(runs []SizeResult) SizeResult {
	byClean := slices.Clone(runs)
	slices.SortStableFunc(byClean, func(a, b SizeResult) int { return cmp.Compare(a.CleanPPS, b.CleanPPS) })
	m := byClean[(len(byClean)-1)/2]
	var peaks []float64
	for _, r := range runs {
		m.CleanRuns = append(m.CleanRuns, r.CleanPPS)
		peaks = append(peaks, r.PeakPPS)
	}
	m.PeakRuns = peaks
	slices.Sort(peaks)
	m.PeakPPS = peaks[(len(peaks)-1)/2]
	return m
}

// profile records gateway 1 with perf(1) for one step at sr's clean rate
// (or its lowest rate if none was clean) and writes the top of perf
// report, flat by symbol, into the results folder. It returns the file's
// name.
func (r *rig) profile(ctx context.Context, k Kind, sr SizeResult, gw1, gw2 *gwproc.Proc) (string, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return "", fmt.Errorf("perf not installed (apt-get install linux-perf): %w", err)
	}
	rate := sr.CleanPPS
	if rate <= 0 && len(sr.Steps) > 0 {
		rate = sr.Steps[0].Offered
	}
	gens, err := r.generators(sr.Size)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.o.Out, 0o755); err != nil {
		return "", fmt.Errorf("results dir: %w", err)
	}
	data := filepath.Join(r.dir, "perf-"+k.Name+".data")
	rec := exec.Command(perf, "record", "-q", "-F", "999", "-g", "-o", data, "-p", strconv.Itoa(gw1.Pid()))
	var recOut strings.Builder
	rec.Stdout, rec.Stderr = &recOut, &recOut
	if err := rec.Start(); err != nil {
		return "", fmt.Errorf("perf record: %w", err)
	}
	time.Sleep(200 * time.Millisecond)
	st, err := r.step(ctx, gens, rate, r.o.Duration, gw1, gw2)
	rec.Process.Signal(os.Interrupt)
	rec.Wait()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(perf, "report", "-i", data, "--stdio", "--no-children", "-g", "none",
		"--sort", "dso,symbol", "--percent-limit", "1").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("perf report: %w: %s %s", err, out, recOut.String())
	}
	name := fmt.Sprintf("profile-%s-%d.txt", k.Name, sr.Size)
	head := fmt.Sprintf("# gateway 1 (%s), %d-byte packets offered at %.0f pps, delivered %.0f pps, loss %.1f%%\n",
		k.Name, sr.Size, st.Offered, st.DeliveredPPS, st.LossPct)
	if err := os.WriteFile(filepath.Join(r.o.Out, name), append([]byte(head), out...), 0o644); err != nil {
		return "", fmt.Errorf("write profile: %w", err)
	}
	r.progress("%s: profile in %s", k.Name, name)
	return name, nil
}
