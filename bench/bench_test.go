package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	if _, err := rig.Run(ctx, o); err != nil {
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
