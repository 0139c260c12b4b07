//go:build linux

package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wgpio/wgpio/bench/internal/rig"
)

// Options configure a run. Start from DefaultOptions.
type Options struct {
	Quick    bool
	Configs  []string      // configuration names; empty = all (Configs())
	Sizes    []int         // inner IPv4 packet lengths, bytes
	CPUs     []int         // CPU counts to pin to, e.g. 1, 2
	Duration time.Duration // per measured step
	Refine   int           // bisection steps between the clean and the lossy rate
	// Rounds is how many closed-loop steps each configuration gets per
	// size, taken in turn over the configurations; the report gives the
	// median.
	Rounds   int
	Out      string    // results folder (required)
	Progress io.Writer // progress lines (nil = none)
	Command  string    // the command line, for the report
	// ClosedOnly measures the closed-loop rounds only (no paced sweep, so
	// no clean rate): with many Rounds, a quick side by side of the
	// configurations' CPU per packet on a noisy machine, where the paired
	// ratios to stock (SizeResult.PairedVsStock) are the figure to read.
	ClosedOnly bool
	// Profiles writes the CPU profile of each size's reported step into
	// Out, with `go tool pprof -top` of it when the go command is there.
	Profiles bool
}

// DefaultOptions returns the full run's options, or the quick run's.
func DefaultOptions(quick bool) Options {
	o := Options{
		Quick: quick, Sizes: []int{64, 512, 1420}, CPUs: []int{1, 2},
		Duration: time.Second, Refine: 2, Rounds: 3, Profiles: true,
	}
	if quick {
		o.Sizes = []int{64, 1420}
		o.Duration = 300 * time.Millisecond
		o.Refine = 0
		o.Rounds = 1
	}
	return o
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// Run measures every configuration at every size and CPU count, in one
// process, and writes the report into o.Out. A configuration that fails
// (does not build, no packet crosses, a corrupt packet at the sink) is
// recorded with its error and makes Run return an error after the others
// ran.
func Run(ctx context.Context, o Options) (*Results, error) {
	if len(o.Sizes) == 0 || len(o.CPUs) == 0 || o.Duration <= 0 || o.Out == "" {
		return nil, errors.New("inproc: sizes, CPU counts, duration and out must be set")
	}
	if len(o.Configs) == 0 {
		o.Configs = Configs()
	}
	for _, c := range o.Configs {
		if !slices.Contains(Configs(), c) {
			return nil, fmt.Errorf("inproc: unknown configuration %q (want some of %s)", c, strings.Join(Configs(), ","))
		}
	}
	for _, s := range o.Sizes {
		if s < minSize || s > tunnelMTU {
			return nil, fmt.Errorf("inproc: packet size %d outside [%d, %d]", s, minSize, tunnelMTU)
		}
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	for _, n := range o.CPUs {
		if n < 1 || n > len(allowed) {
			return nil, fmt.Errorf("inproc: %d CPUs asked, %d allowed", n, len(allowed))
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("inproc: results dir: %w", err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	res := &Results{
		Machine: rig.ThisMachine(o.Command), Out: o.Out, LoadBefore: strings.TrimSpace(string(load)),
		Options: PublicOptions{Quick: o.Quick, Configs: o.Configs, Sizes: o.Sizes, CPUCounts: o.CPUs,
			CPUList: allowed[:slices.Max(o.CPUs)], StepSeconds: o.Duration.Seconds(), Refine: o.Refine,
			Flows: flows, BatchSize: batchSize, Rounds: max(o.Rounds, 1), ClosedOnly: o.ClosedOnly},
	}
	var failed []string
	for _, n := range o.CPUs {
		if ctx.Err() != nil {
			break
		}
		cpus := allowed[:n]
		restore, err := pin(cpus)
		if err != nil {
			return nil, err
		}
		run := CPURun{CPUs: n}
		for _, name := range o.Configs {
			run.Configs = append(run.Configs, ConfigResult{Name: name, Desc: descs[name]})
		}
		measureCPUs(ctx, &o, cpus, run.Configs)
		for _, c := range run.Configs {
			if c.Error != "" {
				failed = append(failed, fmt.Sprintf("%s on %d CPUs: %s", c.Name, n, c.Error))
			}
		}
		restore()
		res.Runs = append(res.Runs, run)
	}
	res.Finished = time.Now().UTC()
	load, _ = os.ReadFile("/proc/loadavg")
	res.LoadAfter = strings.TrimSpace(string(load))
	res.ratios()
	if err := res.Write(o.Out); err != nil {
		return res, err
	}
	switch {
	case len(failed) > 0:
		return res, fmt.Errorf("inproc: %d configuration(s) failed: %s", len(failed), strings.Join(failed, "; "))
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	return res, nil
}

// measureCPUs builds every configuration (all at once: idle ones park and
// cost nothing) and measures each size: first Rounds closed-loop steps,
// taken in turn over the configurations so that each sees the same
// changes of the machine's load, then each configuration's paced steps. A
// configuration that fails gets its Error and is not measured further.
func measureCPUs(ctx context.Context, o *Options, cpus []int, crs []ConfigResult) {
	sts := make([]*setup, len(crs))
	defer func() {
		for _, st := range sts {
			if st != nil {
				st.close()
			}
		}
	}()
	for i := range crs {
		o.progress("%s, %d CPUs: %s", crs[i].Name, len(cpus), crs[i].Desc)
		st, err := build(crs[i].Name, cpus)
		if err != nil {
			crs[i].Error = err.Error()
			continue
		}
		sts[i] = st
	}
	progress := func(name string, size int) func(Step) {
		return func(s Step) {
			mode := "paced "
			if s.ClosedLoop {
				mode = "closed"
			}
			o.progress("%s %4d B %d CPU %s offered %9.0f delivered %9.0f pps loss %5.1f%% gw %6.0f ns/pkt (A %5.0f B %5.0f other %4.0f gen %4.0f sink %4.0f) allocs/pkt %.3f reord %d stale %d CPU share %.2f drops %v",
				name, size, len(cpus), mode, s.Offered, s.DeliveredPPS, s.LossPct, s.GatewaysNsPerPkt, s.ANsPerPkt, s.BNsPerPkt, s.OtherNsPerPkt, s.GenNsPerPkt, s.SinkNsPerPkt, s.AllocsPerPkt, s.Reordered, s.Stale, s.CPUShare, s.Drops)
		}
	}
	for _, size := range o.Sizes {
		if ctx.Err() != nil {
			return
		}
		runners := make([]*runner, len(crs))
		fail := func(i int, err error) {
			crs[i].Error = fmt.Sprintf("%d B: %v", size, err)
			o.progress("%s, %d CPUs: error: %v", crs[i].Name, len(cpus), crs[i].Error)
			if runners[i] != nil {
				runners[i].close()
				runners[i] = nil
			}
		}
		for i, st := range sts {
			if st == nil || crs[i].Error != "" {
				continue
			}
			r, err := newRunner(crs[i].Name, o, st, size)
			if err != nil {
				fail(i, err)
				continue
			}
			runners[i] = r
			if err := r.prepare(); err != nil {
				fail(i, err)
			}
		}
		closed := make([][]Step, len(crs))
		profs := make([][][]byte, len(crs))
		for range max(o.Rounds, 1) {
			for i, r := range runners {
				if r == nil || ctx.Err() != nil {
					continue
				}
				st, prof, err := r.closedLoop()
				if err != nil {
					fail(i, err)
					continue
				}
				closed[i] = append(closed[i], st)
				profs[i] = append(profs[i], prof)
				progress(crs[i].Name, size)(st)
			}
		}
		stock := slices.Index(o.Configs, Stock)
		for i := range runners {
			if stock < 0 || i == stock || len(closed[i]) == 0 {
				continue
			}
			if pr := pairedVsStock(closed[i], closed[stock]); len(pr) > 0 {
				s := slices.Sorted(slices.Values(pr))
				o.progress("%s %4d B %d CPU closed loop, gateways' CPU/pkt vs stock's in the same round: median %.3f, range %.3f-%.3f over %d rounds",
					crs[i].Name, size, len(cpus), s[(len(s)-1)/2], s[0], s[len(s)-1], len(s))
			}
		}
		for i, r := range runners {
			if r == nil || ctx.Err() != nil {
				continue
			}
			sr, ps, err := r.paced(closed[i], profs[i], progress(crs[i].Name, size))
			if err != nil {
				crs[i].Sizes = append(crs[i].Sizes, sr)
				fail(i, err)
				continue
			}
			r.close()
			runners[i] = nil
			if o.Profiles {
				name := crs[i].Name
				at := sr.CleanStep
				if at < 0 {
					at = medianClosed(sr.Steps)
				}
				if at >= 0 && at < len(ps) {
					sr.Profile = writeProfile(o.Out, fmt.Sprintf("profile-%s-%d-%dcpu", name, size, len(cpus)), ps[at])
				}
				if cl := medianClosed(sr.Steps); cl >= 0 && cl != at && cl < len(ps) {
					sr.ClosedProfile = writeProfile(o.Out, fmt.Sprintf("profile-%s-%d-%dcpu-closed", name, size, len(cpus)), ps[cl])
				}
			}
			if stock >= 0 && i != stock {
				sr.PairedVsStock = pairedVsStock(closed[i], closed[stock])
			}
			crs[i].Sizes = append(crs[i].Sizes, sr)
		}
		for _, r := range runners {
			if r != nil {
				r.close()
			}
		}
	}
}

// writeProfile writes prof as <base>.pb.gz into dir and, when the go
// command is there, `go tool pprof -top` of it as <base>.txt. It returns
// the profile's file name ("" if it could not be written).
func writeProfile(dir, base string, prof []byte) string {
	name := base + ".pb.gz"
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, prof, 0o644); err != nil {
		return ""
	}
	if goCmd, err := exec.LookPath("go"); err == nil {
		out, err := exec.Command(goCmd, "tool", "pprof", "-top", "-nodecount=30", p).Output()
		if err == nil {
			os.WriteFile(filepath.Join(dir, base+".txt"), out, 0o644)
		}
	}
	return name
}
