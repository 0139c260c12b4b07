//go:build linux

package inproc

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/wgpio/wgpio/bench/internal/rig"
)

// Key returns the ratio name for a configuration, e.g.
// Key(2, 64, "fastpath-2q", "vs_stock") = "cpus_2.size_64.fastpath_2q.vs_stock";
// cpus 0 leaves out the CPU prefix (the run with the most CPUs).
func Key(cpus, size int, config, what string) string {
	k := fmt.Sprintf("size_%d.%s.%s", size, strings.ReplaceAll(config, "-", "_"), what)
	if cpus > 0 {
		k = fmt.Sprintf("cpus_%d.%s", cpus, k)
	}
	return k
}

// ratios fills Ratios from the runs.
func (res *Results) ratios() {
	res.Ratios = map[string]float64{}
	most := 0
	for _, run := range res.Runs {
		most = max(most, run.CPUs)
	}
	for _, run := range res.Runs {
		ref := run.config(Stock)
		if ref == nil {
			continue
		}
		for _, c := range run.Configs {
			for _, sr := range c.Sizes {
				rs := ref.Size(sr.Size)
				if rs == nil {
					continue
				}
				set := func(what string, v, r float64) {
					if v <= 0 || r <= 0 {
						return
					}
					res.Ratios[Key(run.CPUs, sr.Size, c.Name, what)] = v / r
					if run.CPUs == most {
						res.Ratios[Key(0, sr.Size, c.Name, what)] = v / r
					}
				}
				set("vs_stock", sr.CleanPPS, rs.CleanPPS)
				set("closed_loop_vs_stock", sr.ClosedLoopPPS, rs.ClosedLoopPPS)
				set("cpu_vs_stock", sr.At.GatewaysNsPerPkt, rs.At.GatewaysNsPerPkt)
				set("closed_loop_cpu_vs_stock", sr.Closed.GatewaysNsPerPkt, rs.Closed.GatewaysNsPerPkt)
			}
		}
	}
}

func (run *CPURun) config(name string) *ConfigResult {
	for i := range run.Configs {
		if run.Configs[i].Name == name && run.Configs[i].Error == "" {
			return &run.Configs[i]
		}
	}
	return nil
}

// Write writes results.json, results.md and plot-<size>-<n>cpu.png into
// dir, creating it.
func (res *Results) Write(dir string) error {
	if err := rig.WriteJSONAndMarkdown(dir, res, res.Markdown()); err != nil {
		return fmt.Errorf("inproc: %w", err)
	}
	for _, run := range res.Runs {
		for _, s := range res.Options.Sizes {
			if err := run.plot(s, filepath.Join(dir, fmt.Sprintf("plot-%d-%dcpu.png", s, run.CPUs))); err != nil {
				return err
			}
		}
	}
	return nil
}

// Markdown renders the tables: per CPU count and packet size, one row per
// configuration.
func (res *Results) Markdown() string {
	var b strings.Builder
	o := res.Options
	fmt.Fprintf(&b, "# wgpio in-process bench, %s\n\n", res.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Command: `%s`  \nKernel %s, %d CPUs, %s; pinned to CPUs %v (GOMAXPROCS = CPU count); %d inner flows; %.1f s per step; batch size %d; load average before %s, after %s.\n\n",
		res.Command, res.Kernel, res.CPUs, res.GoVersion, o.CPUList, o.Flows, o.StepSeconds, o.BatchSize, res.LoadBefore, res.LoadAfter)
	b.WriteString("One process: generator → gateway A → gateway B → sink, every packet checked at the sink (headers, payload, sequence). " +
		"'Clean' is the delivered rate at the highest paced offered rate with under 1% loss; 'closed loop' what was delivered with the generator " +
		"keeping at most 2048 packets in flight. CPU per delivered packet at the clean step, from getrusage(RUSAGE_SELF), split by the step's CPU profile " +
		"(pprof label of the goroutines each side started): 'gateways' is gateway A + gateway B + other (samples without a side: Go runtime " +
		"background work), i.e. everything but the generator and the sink, whose own costs are shown. 'Allocs' are the process's heap " +
		"allocations per delivered packet. 'doubles' is the stock configuration's in-memory conn.Bind and tun.Device alone " +
		"(a loop per side instead of wireguard-go): their share of stock's figures. 'At saturation' is the gateways' CPU per packet in the " +
		"closed-loop step, where polling designs pay for no idle polls; 'CPU share' the process's CPU time at the clean step over the CPUs " +
		"pinned to (under 1: idle, or other work on the machine took them).\n\n")
	for _, run := range res.Runs {
		ref := run.config(Stock)
		for _, s := range o.Sizes {
			fmt.Fprintf(&b, "## %d-byte packets, %d CPU(s)\n\n", s, run.CPUs)
			b.WriteString("| configuration | clean | closed loop | gateways CPU/pkt | gw A | gw B | other | allocs/pkt | clean vs stock | CPU/pkt vs stock | at saturation: CPU/pkt | vs stock | generator CPU/pkt | sink CPU/pkt | CPU share | reordered |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			var rs *SizeResult
			if ref != nil {
				rs = ref.Size(s)
			}
			for i := range run.Configs {
				c := &run.Configs[i]
				sr := c.Size(s)
				if sr == nil || c.Error != "" {
					continue
				}
				cr, cpu, sat := "—", "—", "—"
				if rs != nil {
					cr = rig.Ratio(sr.CleanPPS, rs.CleanPPS)
					cpu = rig.Ratio(sr.At.GatewaysNsPerPkt, rs.At.GatewaysNsPerPkt)
					sat = rig.Ratio(sr.Closed.GatewaysNsPerPkt, rs.Closed.GatewaysNsPerPkt)
				}
				a := sr.At
				fmt.Fprintf(&b, "| %s | %s | %s | %.0f ns | %.0f ns | %.0f ns | %.0f ns | %.3f | %s | %s | %.0f ns | %s | %.0f ns | %.0f ns | %.2f | %d |\n",
					c.Name, rig.PPS(sr.CleanPPS), rig.PPS(sr.ClosedLoopPPS), a.GatewaysNsPerPkt, a.ANsPerPkt, a.BNsPerPkt, a.OtherNsPerPkt,
					a.AllocsPerPkt, cr, cpu, sr.Closed.GatewaysNsPerPkt, sat, a.GenNsPerPkt, a.SinkNsPerPkt, a.CPUShare, a.Reordered)
			}
			b.WriteString("\n")
			var paired []string
			for i := range run.Configs {
				if sr := run.Configs[i].Size(s); sr != nil && len(sr.PairedVsStock) > 1 {
					v := slices.Sorted(slices.Values(sr.PairedVsStock))
					paired = append(paired, fmt.Sprintf("%s %.3f (%.3f–%.3f, %d rounds)", run.Configs[i].Name, v[(len(v)-1)/2], v[0], v[len(v)-1], len(v)))
				}
			}
			if len(paired) > 0 {
				fmt.Fprintf(&b, "Closed loop, gateways' CPU/pkt over stock's in the same round (the rounds take the configurations in turn), median (range): %s.\n\n",
					strings.Join(paired, ", "))
			}
		}
	}
	var profs, notes []string
	for _, run := range res.Runs {
		for _, c := range run.Configs {
			if c.Error != "" {
				notes = append(notes, fmt.Sprintf("- %s, %d CPU(s): error: %s", c.Name, run.CPUs, c.Error))
			}
			for _, sr := range c.Sizes {
				if sr.Profile != "" {
					profs = append(profs, fmt.Sprintf("[%d B %s %d CPU](%s)", sr.Size, c.Name, run.CPUs, sr.Profile))
				}
			}
		}
	}
	if len(profs) > 0 {
		b.WriteString("CPU profiles of the reported steps (`go tool pprof -top <file>`; a `.txt` beside each has the top): " + strings.Join(profs, ", ") + ".\n\n")
	}
	if len(notes) > 0 {
		b.WriteString("## Failed\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// plot draws delivered against offered rate at one size, one line per
// configuration (closed-loop steps left out), and delivered = offered.
func (run *CPURun) plot(size int, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("in-process, delivered vs offered, %d-byte packets, %d CPU(s)", size, run.CPUs)
	p.X.Label.Text = "offered (generator achieved), packets/s"
	p.Y.Label.Text = "delivered at the sink, packets/s"
	p.Legend.Top = true
	p.Legend.Left = true
	maxX := 0.0
	i := 0
	for _, c := range run.Configs {
		sr := c.Size(size)
		if sr == nil {
			continue
		}
		steps := slices.DeleteFunc(slices.Clone(sr.Steps), func(s Step) bool { return s.ClosedLoop })
		slices.SortFunc(steps, func(a, b Step) int {
			switch {
			case a.Offered < b.Offered:
				return -1
			case a.Offered > b.Offered:
				return 1
			}
			return 0
		})
		if len(steps) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(steps))
		for j, st := range steps {
			pts[j].X, pts[j].Y = st.Offered, st.DeliveredPPS
			maxX = max(maxX, st.Offered)
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("inproc: plot %s: %w", c.Name, err)
		}
		l.Color, s.Color, s.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(c.Name, l, s)
		i++
	}
	if maxX > 0 {
		if ideal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: maxX, Y: maxX}}); err == nil {
			ideal.Color = color.Gray{Y: 160}
			ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(ideal)
			p.Legend.Add("offered", ideal)
		}
	}
	p.Add(plotter.NewGrid())
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("inproc: save plot: %w", err)
	}
	return nil
}
