//go:build linux

package rig

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteJSONAndMarkdown makes dir and writes v as results.json and md as
// results.md into it: the part of a results folder every bench writes.
func WriteJSONAndMarkdown(dir string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("write results.md: %w", err)
	}
	return nil
}

// Write writes results.json, results.md and plot-<size>.png into dir,
// creating it.
func (res *Results) Write(dir string) error {
	if err := WriteJSONAndMarkdown(dir, res, res.Markdown()); err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	for _, s := range res.Options.Sizes {
		if err := res.plot(s, filepath.Join(dir, fmt.Sprintf("plot-%d.png", s))); err != nil {
			return err
		}
	}
	return nil
}

// PPS formats a packet rate: "350 k", "1.52 M" ("—" for none).
func PPS(v float64) string {
	switch {
	case v <= 0:
		return "—"
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	default:
		return fmt.Sprintf("%.0f k", v/1e3)
	}
}

// Ratio formats v/ref as "1.23×" ("—" when either is not positive).
func Ratio(v, ref float64) string {
	if v <= 0 || ref <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v/ref)
}

// Markdown renders the report tables: per packet size, delivered packets
// per second (clean and peak), CPU time and context switches per delivered
// packet, and the ratios to the reference configuration; then the TCP
// stream; then what was skipped or failed.
func (res *Results) Markdown() string {
	var b strings.Builder
	o := res.Options
	fmt.Fprintf(&b, "# wgpio bench, %s\n\n", res.Started.Format("2006-01-02 15:04 UTC"))
	sweeps := "one sweep"
	if o.Repeat > 1 {
		sweeps = fmt.Sprintf("median of %d sweeps", o.Repeat)
	}
	fmt.Fprintf(&b, "Command: `%s`  \nKernel %s, %d CPUs, %s; gateways on CPUs %s, GOMAXPROCS=%d; %d veth queues; %d inner flows; %.1f s per step; %s.\n\n",
		res.Command, res.Kernel, res.CPUs, res.GoVersion, o.CPUs, o.GOMAXPROCS, o.Queues, o.Flows, o.StepSeconds, sweeps)
	if o.Peer == PeerSame {
		b.WriteString("Both gateways run the configuration. ")
	} else {
		b.WriteString("Gateway 1 runs the configuration; gateway 2 is stock wireguard-go on a kernel TUN (it may cap what the tunnel delivers; -peer same runs the configuration on both). ")
	}
	b.WriteString(
		"'Clean' is the delivered rate at the highest offered rate with under 1% loss; 'peak' the most ever delivered. " +
			"CPU and context switches are per delivered packet at the clean rate; 'of which kernel' is gw1's system time " +
			"(system calls and the softirq work charged to it: on veth, AF_XDP copy mode's copies and the transmit into the next namespace). " +
			"'Generator max' is the highest rate the AF_XDP generator reached (it shares the CPUs); 'sink drops' the sink socket's own losses. " +
			"These are figures from a small shared VM: compare ratios, not absolutes.\n\n")
	var ref *ConfigResult
	for i := range res.Configs {
		if res.Configs[i].Name == Reference && len(res.Configs[i].Sizes) > 0 {
			ref = &res.Configs[i]
		}
	}
	for _, s := range o.Sizes {
		fmt.Fprintf(&b, "## %d-byte packets\n\n", s)
		b.WriteString("| configuration | clean | peak | gw1 CPU/pkt | of which kernel | gw1 ctxsw/pkt | gw2 CPU/pkt | clean vs wg-tun | CPU/pkt vs wg-tun | generator max | sink drops |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		var rs *SizeResult
		if ref != nil {
			rs = ref.Size(s)
		}
		for i := range res.Configs {
			c := &res.Configs[i]
			sr := c.Size(s)
			if sr == nil {
				continue
			}
			cr, cpu := "—", "—"
			if rs != nil {
				cr = Ratio(sr.CleanPPS, rs.CleanPPS)
				cpu = Ratio(sr.GW1CPUNsPerPkt, rs.GW1CPUNsPerPkt)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f ns | %.0f ns | %.3f | %.0f ns | %s | %s | %s | %d |\n",
				c.Name, PPS(sr.CleanPPS), PPS(sr.PeakPPS), sr.GW1CPUNsPerPkt, sr.GW1SysNsPerPkt, sr.GW1CtxPerPkt, sr.GW2CPUNsPerPkt, cr, cpu, PPS(sr.GenMaxPPS), sr.SinkDrops)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "## One inner TCP stream (%.0f s)\n\n", o.TCPSeconds)
	b.WriteString("| configuration | Mbit/s | retransmits | reorder events |\n|---|---|---|---|\n")
	for _, c := range res.Configs {
		if c.TCP != nil {
			fmt.Fprintf(&b, "| %s | %.0f | %d | %d |\n", c.Name, c.TCP.Mbps, c.TCP.Retransmits, c.TCP.ReorderEvents)
		}
	}
	b.WriteString("\n")
	var profs []string
	for _, c := range res.Configs {
		if c.Profile != "" {
			profs = append(profs, fmt.Sprintf("- %s: [%s](%s)", c.Name, c.Profile, c.Profile))
		}
	}
	if len(profs) > 0 {
		b.WriteString("## Profiles of gateway 1 (perf, flat by symbol)\n\n" + strings.Join(profs, "\n") + "\n\n")
	}
	var notes []string
	for _, c := range res.Configs {
		switch {
		case c.Skipped != "":
			notes = append(notes, fmt.Sprintf("- %s: skipped: %s", c.Name, c.Skipped))
		case c.Error != "":
			notes = append(notes, fmt.Sprintf("- %s: error: %s", c.Name, c.Error))
		}
	}
	if len(notes) > 0 {
		b.WriteString("## Not measured\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// plot draws delivered against offered rate, one line per configuration,
// and the line delivered = offered.
func (res *Results) plot(size int, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("delivered vs offered, %d-byte packets", size)
	p.X.Label.Text = "offered (generator achieved), packets/s"
	p.Y.Label.Text = "delivered at the sink, packets/s"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.YOffs = -vg.Points(12)
	p.Legend.XOffs = vg.Points(12)
	maxX := 0.0
	i := 0
	for _, c := range res.Configs {
		sr := c.Size(size)
		if sr == nil || len(sr.Steps) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(sr.Steps))
		for j, st := range sr.Steps {
			pts[j].X, pts[j].Y = st.Achieved, st.DeliveredPPS
			maxX = max(maxX, st.Achieved)
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("rig: plot %s: %w", c.Name, err)
		}
		l.Color = plotutil.Color(i)
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(c.Name, l, s)
		i++
	}
	if maxX > 0 {
		ideal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: maxX, Y: maxX}})
		if err == nil {
			ideal.Color = color.Gray{Y: 160}
			ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(ideal)
			p.Legend.Add("offered", ideal)
		}
	}
	p.Add(plotter.NewGrid())
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("rig: save plot: %w", err)
	}
	return nil
}
