//go:build linux

package rig

import (
	"runtime"
	"time"

	"github.com/wgpio/wgpio/bench/internal/sink"
)

// Machine says when, how and on what a run measured; the rig's and the
// in-process bench's results.json both begin with it.
type Machine struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Command   string    `json:"command"`
	Kernel    string    `json:"kernel"`
	CPUs      int       `json:"cpus"`
	GoVersion string    `json:"go_version"`
}

// ThisMachine is a Machine started now, running command.
func ThisMachine(command string) Machine {
	return Machine{Started: time.Now().UTC(), Command: command, Kernel: kernelRelease(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
}

// Results is everything one run measured (results.json).
type Results struct {
	Machine
	Interrupted bool           `json:"interrupted,omitempty"`
	Options     PublicOptions  `json:"options"`
	Configs     []ConfigResult `json:"configs"`
	// Namespaces are the network namespaces the run made (all removed
	// when Run returns).
	Namespaces []string `json:"namespaces"`
	// Out is the results folder.
	Out string `json:"-"`
}

// PublicOptions are the options as recorded in results.json.
type PublicOptions struct {
	Quick       bool      `json:"quick"`
	Sizes       []int     `json:"sizes"`
	Rates       []float64 `json:"rates_pps"`
	Queues      int       `json:"queues"`
	StepSeconds float64   `json:"step_seconds"`
	Repeat      int       `json:"repeat"`
	TCPSeconds  float64   `json:"tcp_seconds"`
	Flows       int       `json:"flows"`
	CPUs        string    `json:"cpus"`
	GOMAXPROCS  int       `json:"gomaxprocs"`
	Peer        string    `json:"peer"` // what gateway 2 runs
}

func (o Options) public() PublicOptions {
	return PublicOptions{
		Quick: o.Quick, Sizes: o.Sizes, Rates: o.Rates, Queues: o.Queues,
		StepSeconds: o.Duration.Seconds(), Repeat: max(o.Repeat, 1), TCPSeconds: o.TCPDuration.Seconds(),
		Flows: o.Flows, CPUs: o.CPUs, GOMAXPROCS: o.GOMAXPROCS, Peer: o.Peer,
	}
}

// ConfigResult is one configuration's measurements.
type ConfigResult struct {
	Name    string          `json:"name"`
	Desc    string          `json:"desc"`
	Skipped string          `json:"skipped,omitempty"`
	Error   string          `json:"error,omitempty"`
	Sizes   []SizeResult    `json:"sizes,omitempty"`
	TCP     *sink.TCPResult `json:"tcp,omitempty"`
	// Profile names the perf report of gateway 1 in the results folder
	// (with Options.Profile).
	Profile string `json:"profile,omitempty"`
}

// Size returns the result for packet size s, or nil.
func (c *ConfigResult) Size(s int) *SizeResult {
	for i := range c.Sizes {
		if c.Sizes[i].Size == s {
			return &c.Sizes[i]
		}
	}
	return nil
}

// SizeResult is the sweep at one packet size.
type SizeResult struct {
	Size  int    `json:"size"` // IPv4 packet length, bytes
	Steps []Step `json:"steps"`
	// CleanPPS is the delivered rate of the highest-offered step with
	// under 1% loss (0: none); CleanStep its index (-1: none).
	CleanPPS  float64 `json:"clean_pps"`
	CleanStep int     `json:"clean_step"`
	// PeakPPS is the highest delivered rate of any step.
	PeakPPS float64 `json:"peak_pps"`
	// With Options.Repeat > 1, CleanRuns and PeakRuns hold every sweep's
	// clean and peak rates; CleanPPS and PeakPPS are their medians, and
	// Steps and the per-packet figures come from the sweep with the median
	// clean rate.
	CleanRuns []float64 `json:"clean_runs,omitempty"`
	PeakRuns  []float64 `json:"peak_runs,omitempty"`
	// The figures per packet at the clean step (or the first step if none
	// was clean).
	PerPacket
	// GenMaxPPS is the highest rate the generator achieved; GenMinRatio
	// the lowest ratio of achieved to offered rate over the steps (under
	// about 0.97 the generator, not the gateway, limited that step).
	GenMaxPPS   float64 `json:"gen_max_pps"`
	GenMinRatio float64 `json:"gen_min_ratio"`
	// SinkDrops adds up the sink socket's buffer overflows over the steps
	// (not 0: the sink, not the gateway, lost packets).
	SinkDrops uint64 `json:"sink_drops"`
}

// Step is one offered-load step.
type Step struct {
	Offered        float64 `json:"offered_pps"`
	Achieved       float64 `json:"achieved_pps"` // generator's own rate
	Sent           uint64  `json:"sent"`
	Delivered      uint64  `json:"delivered"`
	DeliveredPPS   float64 `json:"delivered_pps"`
	LossPct        float64 `json:"loss_pct"`
	Reordered      uint64  `json:"reordered"`
	Duplicates     uint64  `json:"duplicates"`
	Stale          uint64  `json:"stale"`
	SinkDrops      uint64  `json:"sink_drops"` // sink socket buffer overflows
	GenShort       uint64  `json:"gen_short"`  // generator bursts cut short
	GW1CPUSeconds  float64 `json:"gw1_cpu_s"`
	GW2CPUSeconds  float64 `json:"gw2_cpu_s"`
	GW1CtxSwitches uint64  `json:"gw1_ctxsw"`
	GW2CtxSwitches uint64  `json:"gw2_ctxsw"`
	PerPacket
}

// PerPacket is CPU time and context switches of each gateway per
// delivered packet.
type PerPacket struct {
	GW1CPUNsPerPkt float64 `json:"gw1_cpu_ns_per_pkt"`
	GW2CPUNsPerPkt float64 `json:"gw2_cpu_ns_per_pkt"`
	// GW1SysNsPerPkt is the kernel's part of GW1CPUNsPerPkt (system
	// calls and the softirq work charged to the process: on veth, AF_XDP
	// copy mode's copies and the transmit into the next namespace).
	GW1SysNsPerPkt float64 `json:"gw1_sys_ns_per_pkt"`
	GW1CtxPerPkt   float64 `json:"gw1_ctxsw_per_pkt"`
	GW2CtxPerPkt   float64 `json:"gw2_ctxsw_per_pkt"`
}

// summarize fills the clean, peak and per-packet figures from the steps.
func (s *SizeResult) summarize() {
	s.CleanStep = -1
	for i, st := range s.Steps {
		if st.Delivered > 0 && st.LossPct < 100*cleanLoss {
			s.CleanStep, s.CleanPPS = i, st.DeliveredPPS
		}
		s.PeakPPS = max(s.PeakPPS, st.DeliveredPPS)
		s.GenMaxPPS = max(s.GenMaxPPS, st.Achieved)
		s.SinkDrops += st.SinkDrops
		if st.Offered > 0 && (i == 0 || st.Achieved/st.Offered < s.GenMinRatio) {
			s.GenMinRatio = st.Achieved / st.Offered
		}
	}
	at := s.CleanStep
	if at < 0 {
		at = 0
	}
	if at < len(s.Steps) {
		s.PerPacket = s.Steps[at].PerPacket
	}
}
