//go:build linux

package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/reassembly"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// fullStats is a GatewayStats in which every counter is nonzero, every drop
// reason of every package included, so that its JSON shows every key.
func fullStats() GatewayStats {
	q := fastpath.QueueStats{}
	ones(&q)
	for r := range fastpath.NumDropReasons {
		q.Drops[r] = 1
	}
	for _, p := range []*dataplane.Stats{&q.LAN, &q.WAN} {
		for r := range dataplane.NumDropReasons {
			p.Drops[r] = 1
		}
		// What an AF_XDP port's Stats hold besides (afxdp.Queue.Stats).
		p.Backend = map[string]uint64{fillRingEmptyKey: 1, "xsk_tx_ring_empty_descs": 1, "tx_kicks": 1}
		for _, k := range dataplane.LossCounters {
			p.Backend[k] = 1
		}
	}
	var d gateway.Stats
	ones(&d)
	for r := range gateway.NumDropReasons {
		d.Drops[r] = 1
	}
	for r := range noise.NumDropReasons {
		if r > 0 { // 0 is no reason
			d.Noise.Drops[r] = 1
		}
	}
	c := &CompatStats{}
	ones(c)
	for r := range bind.NumDropReasons {
		c.Bind.Drops[r] = 1
	}
	for r := range header.NumReasons {
		c.Bind.Parse[r] = 1
	}
	for r := range tundev.NumPortDropReasons {
		c.LAN.Drops[r] = 1
	}
	c.WANQueues, c.LANQueues = []dataplane.Stats{q.WAN}, []dataplane.Stats{q.LAN}
	tun := &tundev.TUNStats{}
	ones(tun)
	for r := range tundev.NumTUNDropReasons {
		tun.Drops[r] = 1
	}
	udp := &UDPStats{}
	ones(udp)
	for r := range numUDPDropReasons {
		udp.Drops[r] = 1
	}
	p := PeerStat{PublicKey: "k", Endpoint: "198.18.0.1:51820"}
	ones(&p)
	re := &fastpath.ReassemblyStats{}
	ones(re)
	for r := range reassembly.NumDropReasons {
		re.Drops[r] = 1
	}
	return GatewayStats{Name: "wg0", Queues: []fastpath.QueueStats{q}, Peers: []PeerStat{p}, Device: &d, ExceptionDrops: new(uint64), Compat: c, TUN: tun, UDP: udp, Reassembly: re}
}

// ones sets every uint64 field of the struct v points to (recursively, not
// inside arrays: those are the drop counts, filled by reason) to 1.
func ones(v any) {
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Uint64:
			v.SetUint(1)
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		}
	}
	walk(reflect.ValueOf(v).Elem())
}

// jsonKeys lists the key paths of a JSON document, arrays as [].
func jsonKeys(t *testing.T, b []byte) []string {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(string, any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := path + "." + k
				out = append(out, p)
				walk(p, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
	slices.Sort(out)
	return slices.Compact(out)
}

// metricNames lists the metric names with their label names, and the values
// of the reason and port labels.
func metricNames(t *testing.T, s GatewayStats) []string {
	reg := prometheus.NewRegistry()
	if err := reg.Register(newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return s.Peers, true })); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "reason", "port":
					labels = append(labels, l.GetName()+"="+l.GetValue())
				default:
					labels = append(labels, l.GetName())
				}
			}
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"} "+mf.GetType().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestStatsNamesGolden guards the names users script against: every key of
// `wgpio stats -json` (drop reasons of every package included) and every
// /metrics name, label and reason listed in the golden files must still be
// there. A name that disappears or changes breaks dashboards and scripts and
// fails the test; a new one (a new drop reason) only shows in the log, so
// that adding a reason stays a one-line change. Record new names with go
// test ./cmd/wgpio -run TestStatsNamesGolden -update.
func TestStatsNamesGolden(t *testing.T) {
	s := fullStats()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "stats_json_keys.golden", jsonKeys(t, b))
	// A gateway runs one mode: compat's queues have the fast path's
	// queues' metric names and labels, so they are gathered apart.
	fast := s
	fast.Compat = &CompatStats{Bind: s.Compat.Bind, LAN: s.Compat.LAN}
	names := append(metricNames(t, fast), metricNames(t, GatewayStats{Name: s.Name, Compat: s.Compat})...)
	slices.Sort(names)
	golden(t, "metrics_names.golden", slices.Compact(names))
}

func golden(t *testing.T, name string, got []string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	have := make(map[string]bool, len(got))
	for _, g := range got {
		have[g] = true
	}
	var missing []string
	for _, w := range want {
		if !have[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d names disappeared or changed (users script against them):\n%s", name, len(missing), strings.Join(missing, "\n"))
	}
	old := make(map[string]bool, len(want))
	for _, w := range want {
		old[w] = true
	}
	var added []string
	for _, g := range got {
		if !old[g] {
			added = append(added, g)
		}
	}
	if len(added) > 0 {
		t.Logf("%s: %d new names (record them with -update):\n%s", name, len(added), strings.Join(added, "\n"))
	}
}
