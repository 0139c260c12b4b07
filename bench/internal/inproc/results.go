//go:build linux

package inproc

import (
	"github.com/wgpio/wgpio/bench/internal/rig"
)

// Results is everything one in-process run measured (results.json).
type Results struct {
	rig.Machine
	Options PublicOptions `json:"options"`
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the
	// end: other work on the machine competes for the pinned CPUs.
	LoadBefore string `json:"loadavg_before"`
	LoadAfter  string `json:"loadavg_after"`
	// Runs has one entry per CPU count.
	Runs []CPURun `json:"runs"`
	// Ratios are the figures scripts read, named
	// "cpus_<n>.size_<bytes>.<config>.<what>" with config's "-" as "_"
	// (stock, compat, fastpath_1q, ...) and what one of vs_stock (clean
	// rate over stock's), cpu_vs_stock (gateways' CPU per packet over
	// stock's, at the clean step), closed_loop_vs_stock (closed-loop
	// rate over stock's) and closed_loop_cpu_vs_stock (gateways' CPU per
	// packet in the closed-loop step over stock's); the same names without the
	// "cpus_<n>." prefix give the run with the most CPUs.
	Ratios map[string]float64 `json:"ratios"`
	// Out is the results folder.
	Out string `json:"-"`
}

// PublicOptions are the options as recorded in results.json.
type PublicOptions struct {
	Quick       bool     `json:"quick"`
	Configs     []string `json:"configs"`
	Sizes       []int    `json:"sizes"`
	CPUCounts   []int    `json:"cpu_counts"`
	CPUList     []int    `json:"cpu_list"` // the CPUs pinned to, in order
	StepSeconds float64  `json:"step_seconds"`
	Refine      int      `json:"refine"`
	Flows       int      `json:"flows"`
	BatchSize   int      `json:"batch_size"` // the doubles' BatchSize
	Rounds      int      `json:"rounds"`     // closed-loop rounds per configuration and size
	ClosedOnly  bool     `json:"closed_only,omitempty"`
}

// CPURun is every configuration measured with the process pinned to
// CPUs CPUs (GOMAXPROCS the same).
type CPURun struct {
	CPUs    int            `json:"cpus"`
	Configs []ConfigResult `json:"configs"`
}

// ConfigResult is one configuration's measurements.
type ConfigResult struct {
	Name  string       `json:"name"`
	Desc  string       `json:"desc"`
	Error string       `json:"error,omitempty"`
	Sizes []SizeResult `json:"sizes,omitempty"`
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
	Size  int    `json:"size"` // inner IPv4 packet length, bytes
	Steps []Step `json:"steps"`
	// ClosedLoopPPS is what the closed-loop step delivered (the generator
	// as fast as the first gateway takes packets).
	ClosedLoopPPS float64 `json:"closed_loop_pps"`
	// CleanPPS is the delivered rate of the paced step with the highest
	// offered rate and under 1% loss (0: none); CleanStep its index (-1:
	// none).
	CleanPPS  float64 `json:"clean_pps"`
	CleanStep int     `json:"clean_step"`
	// At is the step the per-packet figures come from: the clean step, or
	// the closed-loop step if none was clean.
	At Step `json:"at"`
	// Closed is the closed-loop step: the per-packet figures at
	// saturation, where a polling design does not pay for idle polls.
	Closed Step `json:"closed"`
	// Profile names the CPU profile of step At in the results folder.
	Profile string `json:"profile,omitempty"`
	// ClosedProfile names the CPU profile of the closed-loop step, when
	// that is not At.
	ClosedProfile string `json:"closed_profile,omitempty"`
	// PairedVsStock is, per closed-loop round, the gateways' CPU per
	// packet over stock's in the same round (the rounds take the
	// configurations in turn); absent for stock and without it.
	PairedVsStock []float64 `json:"paired_vs_stock,omitempty"`
}

// Step is one offered-load step.
type Step struct {
	ClosedLoop   bool    `json:"closed_loop,omitempty"`
	Offered      float64 `json:"offered_pps"` // as the generator achieved it
	Sent         uint64  `json:"sent"`
	Delivered    uint64  `json:"delivered"` // checked good at the sink
	DeliveredPPS float64 `json:"delivered_pps"`
	LossPct      float64 `json:"loss_pct"`
	Reordered    uint64  `json:"reordered"`
	Stale        uint64  `json:"stale"`
	Foreign      uint64  `json:"foreign"`
	Corrupt      uint64  `json:"corrupt"`
	// Drops are the step's drops by place and reason: a_input_full (the
	// packets gateway A's input refused), the doubles' full rings, the
	// ports', binds', TUN devices' and engines' counters. wireguard-go
	// drops some packets without counting them (its full queues), so
	// these need not add up to the loss.
	Drops map[string]uint64 `json:"drops,omitempty"`
	// CPUSeconds is the process's CPU time over the step and its drain;
	// ProfiledSeconds what the CPU profile sampled of it.
	CPUSeconds      float64 `json:"cpu_s"`
	ProfiledSeconds float64 `json:"profiled_s"`
	// CPUShare is CPUSeconds over the step's wall time times the CPUs
	// pinned to: under 1 when the process did not get all of them (other
	// work on the machine, or idle).
	CPUShare float64 `json:"cpu_share"`
	Allocs   uint64  `json:"allocs"`
	// Per delivered packet: the whole process, then its parts: gateway A
	// (encrypt side), gateway B (decrypt side), the generator, the sink,
	// and other (the rest: the Go runtime's background work, such as
	// garbage collection, timer callbacks, and the idle configurations'
	// own background work, e.g. their control planes' ticks). Gateways is
	// A + B + other: everything but the generator and the sink.
	CPUNsPerPkt      float64 `json:"cpu_ns_per_pkt"`
	ANsPerPkt        float64 `json:"gw_a_ns_per_pkt"`
	BNsPerPkt        float64 `json:"gw_b_ns_per_pkt"`
	GenNsPerPkt      float64 `json:"generator_ns_per_pkt"`
	SinkNsPerPkt     float64 `json:"sink_ns_per_pkt"`
	OtherNsPerPkt    float64 `json:"other_ns_per_pkt"`
	GatewaysNsPerPkt float64 `json:"gateways_ns_per_pkt"`
	AllocsPerPkt     float64 `json:"allocs_per_pkt"`
}
