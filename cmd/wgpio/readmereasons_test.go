//go:build linux

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// TestReadmeDropReasons: every reason label of the drop counters an
// operator alerts on (wgpio_drops_total, wgpio_control_drops_total,
// wgpio_handshake_invalid_total, wgpio_port_drops_total) has a row of its
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
}
