//go:build linux

package rig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

func testGateway() Gateway {
	var g Gateway
	g.Name, g.LAN, g.WAN, g.TUN = "gw1", "lan0", "wan0", "wgb1-test"
	for i := range g.PrivateKey {
		g.PrivateKey[i] = byte(i + 1)
		g.PeerPublic[i] = byte(100 + i)
	}
	g.PrivateKey[0] &= 248
	g.PrivateKey[31] = g.PrivateKey[31]&127 | 64
	g.ListenPort, g.Endpoint, g.TunnelAddr = 51820, "198.18.2.2:51820", "198.19.0.1/30"
	g.AllowedIPs, g.MTU, g.Queues, g.CPUs = []string{"198.18.3.0/24", "198.19.0.2/32"}, 1420, 2, "0-1"
	return g
}

// TestWGPIOConfigParses checks the rig's wgpio file against the config
// package's parser (the format's owner).
func TestWGPIOConfigParses(t *testing.T) {
	g := testGateway()
	f, err := config.Parse("gw1.conf", strings.NewReader(WGPIOConfig(g, "fastpath", 2)))
	if err != nil {
		t.Fatalf("config.Parse(WGPIOConfig) = %v", err)
	}
	if len(f.Peers) != 1 || f.WGPIO.Queues != 2 || f.WGPIO.WAN != "wan0" || f.WGPIO.LAN != "lan0" || string(f.WGPIO.Mode) != "fastpath" {
		t.Errorf("config.Parse(WGPIOConfig) = %+v, want one peer, 2 queues, wan0/lan0, fastpath", f)
	}
	if len(f.Warnings) != 0 {
		t.Errorf("config.Parse warnings = %v, want none", f.Warnings)
	}
}

// TestUAPIAccepted applies the rig's UAPI text to a stock wireguard-go
// device (on an in-memory TUN and a bind that is never opened).
func TestUAPIAccepted(t *testing.T) {
	tn := tuntest.NewChannelTUN()
	d := device.NewDevice(tn.TUN(), conn.NewStdNetBind(), device.NewLogger(device.LogLevelSilent, ""))
	defer d.Close()
	g := testGateway()
	g.ListenPort = 0 // do not take a port
	if err := d.IpcSet(UAPI(g)); err != nil {
		t.Fatalf("IpcSet(UAPI) = %v", err)
	}
	got, err := d.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"allowed_ip=198.18.3.0/24", "allowed_ip=198.19.0.2/32", "endpoint=198.18.2.2:51820"} {
		if !strings.Contains(got, want) {
			t.Errorf("IpcGet() lacks %q:\n%s", want, got)
		}
	}
}

func TestBracket(t *testing.T) {
	st := func(off float64, loss float64) Step { return Step{Offered: off, Delivered: 1, LossPct: loss} }
	for _, tc := range []struct {
		name   string
		steps  []Step
		lo, hi float64
	}{
		{"clean then lossy", []Step{st(10, 0), st(20, 0.5), st(40, 30), st(80, 60)}, 20, 40},
		{"all clean", []Step{st(10, 0), st(20, 0)}, 20, 0},
		{"none clean", []Step{st(10, 5), st(20, 50)}, 0, 10},
		{"dip then clean", []Step{st(10, 0), st(20, 2), st(40, 0.1), st(80, 9)}, 40, 80},
	} {
		lo, hi := bracket(tc.steps)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("bracket(%s) = %v, %v; want %v, %v", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestSummarize(t *testing.T) {
	s := SizeResult{Size: 64, Steps: []Step{
		{Offered: 100, Achieved: 100, Delivered: 100, DeliveredPPS: 100, PerPacket: PerPacket{GW1CPUNsPerPkt: 5}},
		{Offered: 200, Achieved: 190, Delivered: 189, DeliveredPPS: 189, LossPct: 0.5, PerPacket: PerPacket{GW1CPUNsPerPkt: 4, GW1CtxPerPkt: 0.1}, SinkDrops: 1},
		{Offered: 400, Achieved: 300, Delivered: 150, DeliveredPPS: 250, LossPct: 50, PerPacket: PerPacket{GW1CPUNsPerPkt: 3}},
	}}
	s.summarize()
	if s.CleanStep != 1 || s.CleanPPS != 189 || s.PeakPPS != 250 || s.GW1CPUNsPerPkt != 4 || s.GW1CtxPerPkt != 0.1 || s.GenMaxPPS != 300 || s.GenMinRatio != 0.75 || s.SinkDrops != 1 {
		t.Errorf("summarize() = %+v, want clean step 1 (189 pps, 4 ns, 0.1 cs), peak 250, gen max 300, gen ratio 0.75, 1 sink drop", s)
	}
	none := SizeResult{Steps: []Step{{Offered: 100, Sent: 100, Delivered: 10, DeliveredPPS: 10, LossPct: 90, PerPacket: PerPacket{GW1CPUNsPerPkt: 7}}}}
	none.summarize()
	if none.CleanStep != -1 || none.CleanPPS != 0 || none.GW1CPUNsPerPkt != 7 {
		t.Errorf("summarize(no clean step) = %+v, want clean step -1, 0 pps, the first step's CPU", none)
	}
}

// TestWrite renders a synthetic result: the table has a row per measured
// configuration with its ratio to the reference, and the files exist.
func TestWrite(t *testing.T) {
	res := &Results{Options: PublicOptions{Sizes: []int{64}, Queues: 2}, Configs: []ConfigResult{
		{Name: Reference, Sizes: []SizeResult{{Size: 64, CleanPPS: 100e3, PeakPPS: 120e3, PerPacket: PerPacket{GW1CPUNsPerPkt: 8000},
			Steps: []Step{{Offered: 100e3, Achieved: 100e3, DeliveredPPS: 100e3}}}}},
		{Name: "wgpio-fastpath-1q", Sizes: []SizeResult{{Size: 64, CleanPPS: 1.5e6, PeakPPS: 2e6, PerPacket: PerPacket{GW1CPUNsPerPkt: 400},
			Steps: []Step{{Offered: 1.5e6, Achieved: 1.5e6, DeliveredPPS: 1.5e6}}}}},
		{Name: "wgpio-compat", Skipped: "binary not available: x"},
	}}
	dir := t.TempDir()
	if err := res.Write(dir); err != nil {
		t.Fatalf("Write = %v", err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	for _, want := range []string{"| wgpio-fastpath-1q | 1.50 M | 2.00 M | 400 ns |", "| 15.00× | 0.05× |", "wgpio-compat: skipped: binary not available"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	for _, f := range []string{"results.json", "plot-64.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("Write made no %s: %v", f, err)
		}
	}
}

func TestMedianRun(t *testing.T) {
	runs := []SizeResult{
		{CleanPPS: 300, PeakPPS: 10, PerPacket: PerPacket{GW1CPUNsPerPkt: 3}},
		{CleanPPS: 100, PeakPPS: 30, PerPacket: PerPacket{GW1CPUNsPerPkt: 1}},
		{CleanPPS: 200, PeakPPS: 20, PerPacket: PerPacket{GW1CPUNsPerPkt: 2}},
	}
	m := medianRun(runs)
	if m.CleanPPS != 200 || m.GW1CPUNsPerPkt != 2 || m.PeakPPS != 20 || len(m.CleanRuns) != 3 || len(m.PeakRuns) != 3 {
		t.Errorf("medianRun = %+v, want the 200-pps run with peak 20 and 3 runs recorded", m)
	}
	if one := medianRun(runs[:1]); one.CleanPPS != 300 || one.PeakPPS != 10 {
		t.Errorf("medianRun(one) = %+v, want it unchanged", one)
	}
}

func TestAllowedCPUs(t *testing.T) {
	got := allowedCPUs()
	if got == "" || strings.ContainsAny(got, " ;") {
		t.Errorf("allowedCPUs() = %q, want a taskset -c list", got)
	}
}
