//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bench/internal/inproc"
	"github.com/wgpio/wgpio/bench/internal/rig"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestQuickRig runs the whole rig with a tiny sweep, so that it cannot rot:
// every configuration (stock wireguard-go and each wgpio one) must be
// measured and deliver packets, then the report is checked.
func TestQuickRig(t *testing.T) {
	testenv.Root(t)
	testenv.Short(t, "runs the bench rig (about a minute)")
	for _, tool := range []struct{ name, pkg string }{{"ip", "iproute2"}, {"ping", "iputils-ping"}, {"taskset", "util-linux"}, {"go", "golang"}} {
		testenv.Tool(t, tool.name, tool.pkg)
	}
	o := rig.DefaultOptions(true)
	o.Sizes = []int{64}
	o.Rates = []float64{10e3, 30e3}
	o.Duration = 500 * time.Millisecond
	o.TCPDuration = time.Second
	o.ReadyTimeout = 15 * time.Second
	o.Out = t.TempDir()
	o.Command = "go test ./bench -run TestQuickRig"
	o.Progress = testWriter{t}
	// A bound for a hung rig, counted once the binaries are built: their
	// build alone took two minutes of CI's loaded machine (while go test
	// compiled other packages), after which the quick sweep (30 s on a
	// quiet machine) ran out of a bound that counted the build too.
	o.Timeout = 150 * time.Second
	if _, err := rig.Run(context.Background(), o); err != nil {
		t.Fatalf("rig.Run = %v, want nil", err)
	}

	b, err := os.ReadFile(filepath.Join(o.Out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res rig.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	// Every configuration, stock and wgpio alike, must have been measured:
	// a rig that skips or fails the wgpio ones proves nothing.
	var ref *rig.ConfigResult
	measured := map[string]bool{}
	for i, c := range res.Configs {
		if c.Name == rig.Reference {
			ref = &res.Configs[i]
		}
		switch {
		case c.Skipped != "" || c.Error != "":
			t.Errorf("%s: skipped %q, error %q; want it measured", c.Name, c.Skipped, c.Error)
		case len(c.Sizes) != 1:
			t.Errorf("%s: %d size results, want 1", c.Name, len(c.Sizes))
		case len(c.Sizes[0].Steps) == 0 || c.Sizes[0].Steps[0].Delivered == 0:
			t.Errorf("%s: nothing delivered at the first step (%+v)", c.Name, c.Sizes[0].Steps)
		default:
			measured[c.Name] = true
		}
	}
	for _, k := range rig.Kinds(o.Queues) {
		if !measured[k.Name] {
			t.Errorf("configuration %s not measured (results.json has %d configurations)", k.Name, len(res.Configs))
		}
	}
	if ref == nil || len(ref.Sizes) == 0 {
		t.Fatalf("no %s result in results.json", rig.Reference)
	}
	sr := ref.Sizes[0]
	if sr.PeakPPS <= 0 || len(sr.Steps) == 0 || sr.Steps[0].Delivered == 0 {
		t.Errorf("%s: peak %v pps, first step delivered %d; want > 0", rig.Reference, sr.PeakPPS, sr.Steps[0].Delivered)
	}
	if st := sr.Steps[0]; st.Sent == 0 || st.Achieved <= 0 {
		t.Errorf("%s: generator sent %d at %.0f pps, want some", rig.Reference, st.Sent, st.Achieved)
	}
	if sr.GW1CPUNsPerPkt <= 0 {
		t.Errorf("%s: gw1 CPU per packet = %v ns, want > 0", rig.Reference, sr.GW1CPUNsPerPkt)
	}
	if ref.TCP == nil || ref.TCP.Bytes == 0 {
		t.Errorf("%s: TCP result %+v, want bytes > 0", rig.Reference, ref.TCP)
	}
	for _, f := range []string{"results.md", "plot-64.png"} {
		fi, err := os.Stat(filepath.Join(o.Out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("report file %s: %v (size %d), want a non-empty file", f, err, sizeOf(fi))
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.Out, "results.md"))
	if !strings.Contains(string(md), "| "+rig.Reference+" |") {
		t.Errorf("results.md has no row for %s:\n%s", rig.Reference, md)
	}
	if len(res.Namespaces) != 4 {
		t.Errorf("results.json names %d namespaces, want 4", len(res.Namespaces))
	}
	for _, ns := range res.Namespaces {
		if _, err := os.Stat(filepath.Join("/var/run/netns", ns)); err == nil {
			t.Errorf("namespace %s still exists after Run", ns)
		}
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuickInProcess runs `-inprocess -quick` (at one size and CPU count,
// to stay short) and checks that every configuration measured real
// numbers and that the report and the ratios scripts read are there.
func TestQuickInProcess(t *testing.T) {
	testenv.Short(t, "runs the in-process bench (about a minute)")
	o := inproc.DefaultOptions(true)
	o.Sizes = []int{64}
	o.CPUs = []int{min(2, runtime.NumCPU())}
	o.Profiles = false
	o.Out = t.TempDir()
	o.Command = "go test ./bench -run TestQuickInProcess"
	o.Progress = testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	res, err := inproc.Run(ctx, o)
	if err != nil {
		t.Fatalf("inproc.Run = %v, want nil", err)
	}
	b, err := os.ReadFile(filepath.Join(o.Out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got inproc.Results
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(got.Runs) != 1 || len(got.Runs[0].Configs) != len(inproc.Configs()) {
		t.Fatalf("results.json has %d runs, want 1 with %d configurations", len(got.Runs), len(inproc.Configs()))
	}
	for _, c := range got.Runs[0].Configs {
		sr := c.Size(64)
		if c.Error != "" || sr == nil {
			t.Errorf("%s: error %q, 64-byte result %v; want a measurement", c.Name, c.Error, sr != nil)
			continue
		}
		// CPU time comes from getrusage, always there; its split by
		// profile samples may be empty in a short step on a busy machine,
		// so only the total is required.
		if sr.ClosedLoopPPS <= 0 || sr.At.Delivered == 0 || sr.At.CPUNsPerPkt <= 0 || sr.Closed.CPUNsPerPkt <= 0 {
			t.Errorf("%s: closed loop %.0f pps, %d delivered at the reported step, %.0f and %.0f CPU ns/pkt; want all > 0",
				c.Name, sr.ClosedLoopPPS, sr.At.Delivered, sr.At.CPUNsPerPkt, sr.Closed.CPUNsPerPkt)
		}
		for _, st := range sr.Steps {
			if st.Corrupt != 0 || st.Delivered > st.Sent {
				t.Errorf("%s: step %+v: corrupt or more delivered than sent", c.Name, st)
			}
		}
	}
	for _, k := range []string{"size_64.compat.closed_loop_vs_stock", "size_64.fastpath_1q.closed_loop_vs_stock", "size_64.fastpath_2q.closed_loop_vs_stock"} {
		if v := got.Ratios[k]; v <= 0 {
			t.Errorf("ratio %s = %v, want > 0", k, v)
		}
	}
	if v := got.Ratios["size_64.stock.closed_loop_vs_stock"]; v != 1 {
		t.Errorf("stock's own closed-loop ratio = %v, want 1", v)
	}
	for _, f := range []string{"results.md", "plot-64-" + strconv.Itoa(o.CPUs[0]) + "cpu.png"} {
		fi, err := os.Stat(filepath.Join(o.Out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("report file %s: %v (size %d), want a non-empty file", f, err, sizeOf(fi))
		}
	}
	if md := res.Markdown(); !strings.Contains(md, "| stock |") || !strings.Contains(md, "| fastpath-2q |") {
		t.Errorf("results.md lacks the stock or fastpath-2q row:\n%s", md)
	}
}
