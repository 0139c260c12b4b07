//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
)

// rxVLANFeatures are the features of RX VLAN offload the ports turn off
// (afxdp's rxVLANFeatures), both on on a veth by default.
var rxVLANFeatures = []string{"rx-vlan-hw-parse", "rx-vlan-stag-hw-parse"}

// rxVLANOff lists the features of rxVLANFeatures that gwA's WAN and
// LAN have off.
func (s *site) rxVLANOff(t *testing.T) []string {
	t.Helper()
	var off []string
	for _, dev := range []string{s.WANA, s.LANA} {
		fs, err := s.GwA.Features(dev)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rxVLANFeatures {
			if !fs[f] {
				off = append(off, dev+" "+f)
			}
		}
	}
	return off
}

// offloadRecords lists the records of RX VLAN offload changes in gwA's
// network namespace under runDir.
func (s *site) offloadRecords(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(runDir, "offload-"+nsInode(t, s)+"-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestUpRestoresOffloadAfterKill: a `wgpio up` killed with SIGKILL leaves
// RX VLAN offload off on its interfaces, a host setting, and its records
// of that under /var/run/wgpio; the next `wgpio up` turns it back on before
// it starts (and says so, once per interface), and at its clean stop turns
// it back on again, leaving no record. Before, it found the offload off,
// had nothing to restore, and left it off for good.
func TestUpRestoresOffloadAfterKill(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeFastPath, config.ModeCompat} {
		t.Run(string(mode), func(t *testing.T) {
			s := newSite(t, func(f *config.File) { f.WGPIO.Mode = mode })
			t.Cleanup(func() {
				for _, p := range s.offloadRecords(t) {
					os.Remove(p)
				}
			})
			if off := s.rxVLANOff(t); len(off) > 0 {
				t.Fatalf("RX VLAN offload off before the test: %v; want veth's default, on", off)
			}
			g := s.up(t)
			if off := s.rxVLANOff(t); len(off) != 2*len(rxVLANFeatures) {
				t.Errorf("RX VLAN offload off while the gateway runs: %v, want all of %v on %s and %s", off, rxVLANFeatures, s.WANA, s.LANA)
			}
			g.cmd.Process.Kill()
			select {
			case <-g.done:
			case <-time.After(10 * time.Second):
				t.Fatal("wgpio did not exit on SIGKILL")
			}
			if recs := s.offloadRecords(t); len(recs) != 2 {
				t.Errorf("after SIGKILL, records %v, want one for each of %s and %s", recs, s.WANA, s.LANA)
			}

			// The killed one's stats socket stays (waitUp finds it at
			// once): wait for the log line that follows the start.
			g2 := s.up(t)
			waitFor(t, 20*time.Second, "the second wgpio up to run", func() bool {
				return g2.exited() || strings.Contains(g2.output(), `msg="running`)
			})
			out := g2.output()
			if n := strings.Count(out, "turned RX VLAN offload back on: the wgpio that turned it off ended without its clean stop"); n != 2 ||
				!strings.Contains(out, "interface="+s.WANA+" ") || !strings.Contains(out, "interface="+s.LANA+" ") {
				t.Errorf("the second wgpio up logged the restore %d times, want once for %s and once for %s:\n%s", n, s.WANA, s.LANA, out)
			}
			g2.cmd.Process.Signal(syscall.SIGTERM)
			if code := waitExit(t, g2, "SIGTERM"); code != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0:\n%s", code, g2.output())
			}
			if off := s.rxVLANOff(t); len(off) > 0 {
				t.Errorf("after SIGKILL, a new start and its clean stop, RX VLAN offload still off: %v", off)
			}
			if recs := s.offloadRecords(t); len(recs) > 0 {
				t.Errorf("records left after the clean stop: %v", recs)
			}
		})
	}
}
