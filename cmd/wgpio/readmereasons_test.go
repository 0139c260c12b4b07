//go:build linux

package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// TestReadmeDropReasons: every reason label of the drop counters an
// operator alerts on (wgpio_drops_total, wgpio_control_drops_total,
// wgpio_handshake_invalid_total, wgpio_port_drops_total, and compat mode's
// wgpio_compat_drops_total by side) has a row of its
// own in README's "Drop reasons, one by one", under its metric's heading:
// a user who sees a label grow finds what was dropped and what to look
// at. Before, README named about two thirds of them (no word of
// expired_keypair, allowed_ips, authentication, handshake_queue_full,
// counter_limit, nonce_exhausted, no_private_key, index_table_full, runt,
// ..., all exported with zeros from the start).
func TestReadmeDropReasons(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "### Drop reasons, one by one"
	_, sec, ok := strings.Cut(string(b), "\n"+head+"\n")
	if !ok {
		t.Fatalf("README has no section %q", head)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	// The section's part for a metric: from its heading to the next.
	part := func(metric string) string {
		_, p, ok := strings.Cut(sec, "\n#### `"+metric+"`")
		if !ok {
			t.Errorf("README %q: no heading #### `%s`", head, metric)
			return ""
		}
		if i := strings.Index(p, "\n#### "); i >= 0 {
			p = p[:i]
		}
		return p
	}
	check := func(metric string, names []string) {
		p := part(metric)
		if p == "" {
			return
		}
		var missing []string
		for _, n := range names {
			if !strings.Contains(p, "\n| `"+n+"` |") {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Errorf("README, %s: no row for reason %s", metric, strings.Join(missing, ", "))
		}
	}
	var names []string
	for r := range fastpath.NumDropReasons {
		names = append(names, r.String())
	}
	check("wgpio_drops_total", names)
	names = names[:0]
	for r := range gateway.NumDropReasons {
		names = append(names, r.Key())
	}
	check("wgpio_control_drops_total", names)
	names = names[:0]
	for r := noise.DropReason(1); r < noise.NumDropReasons; r++ {
		if r != noise.DropCookieRequired && r != noise.DropUnknownPeer { // not handshake_invalid (gateway.Stats.InvalidReasons)
			names = append(names, r.Key())
		}
	}
	check("wgpio_handshake_invalid_total", names)
	names = names[:0]
	for r := range dataplane.NumDropReasons {
		names = append(names, r.String())
	}
	check("wgpio_port_drops_total", names)
	// Compat mode's, by side: the two tables under one heading, side
	// wan's first.
	names = names[:0]
	for r := range bind.NumDropReasons {
		names = append(names, r.String())
	}
	wan, lan, _ := strings.Cut(part("wgpio_compat_drops_total"), "Side `lan`")
	checkIn := func(p, what string, names []string) {
		var missing []string
		for _, n := range names {
			if !strings.Contains(p, "\n| `"+n+"` |") {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Errorf("README, wgpio_compat_drops_total, %s: no row for reason %s", what, strings.Join(missing, ", "))
		}
	}
	checkIn(wan, "side wan", names)
	names = names[:0]
	for r := range tundev.NumPortDropReasons {
		names = append(names, r.String())
	}
	checkIn(lan, "side lan", names)
}

// TestReadmeMetrics: README's "Metrics, one by one" has a row for every
// metric the gateway exports (the collector's and the reload gauges),
// with its labels besides device, and none for a metric it does not
// export. Before, 15 of them (the packet counts, the ports' frames,
// wgpio_live_sessions, ...) were named in no document.
func TestReadmeMetrics(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "### Metrics, one by one"
	_, sec, ok := strings.Cut(string(b), "\n"+head+"\n")
	if !ok {
		t.Fatalf("README has no section %q", head)
	}
	sec, _, _ = strings.Cut(sec, "\n### ")
	rows := make(map[string]string) // metric: its labels cell
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		rows[strings.Trim(cells[0], "| `")] = cells[1]
	}
	want := make(map[string]string)
	ch := make(chan *prometheus.Desc, 256)
	newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return GatewayStats{} }, func(int) ([]PeerStat, bool) { return nil, true }).Describe(ch)
	for _, c := range reloadMetrics("wg0", newReloadState(time.Now())) {
		c.Describe(ch)
	}
	close(ch)
	// A Desc tells its name and labels only in its String.
	re := regexp.MustCompile(`fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the metric's name and labels from %s", d)
		}
		labels := "—"
		if m[2] != "" {
			labels = "`" + strings.ReplaceAll(m[2], ",", "`, `") + "`"
		}
		want[m[1]] = labels
	}
	if len(want) < 50 {
		t.Fatalf("%d metrics described: the exporter was not read", len(want))
	}
	for name, labels := range want {
		got, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("README, %s: no row for %s (labels %s)", head, name, labels)
		case got != labels:
			t.Errorf("README, %s: %s has labels %s, the exporter %s", head, name, got, labels)
		}
	}
	for name := range rows {
		if _, ok := want[name]; !ok {
			t.Errorf("README, %s: a row for %s, which the gateway does not export", head, name)
		}
	}
}
