//go:build linux

package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/emfile"
	"github.com/wgpio/wgpio/internal/topo"
)

// statsEMFILEEnv names the stats socket of statsEMFILE, the child of
// TestStatsOutlivesEMFILE.
const statsEMFILEEnv = "WGPIO_TEST_STATS_EMFILE"

// statsEMFILE serves `wgpio stats` as name in the child of
// TestStatsOutlivesEMFILE, its descriptors used up (emfile.Fill), and
// exits when its stdin ends. Its log goes to stderr.
func statsEMFILE(name string) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	stop, err := serveStats(log, name, func() any { return "ok" })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	emfile.Fill()
	stop()
	os.Exit(0)
}

// TestStatsOutlivesEMFILE: `wgpio stats` is answered again once a
// gateway that ran out of file descriptors has some back. A connection
// that came while none was free failed the stats socket's accept
// (EMFILE), which ended its loop for good: every later `wgpio stats`
// hung until the gateway restarted. The failure is logged once, and the
// waiting client is answered.
func TestStatsOutlivesEMFILE(t *testing.T) {
	testenv.Root(t)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := topo.UniqueName("wgpe")
	child := emfile.Start(t, statsEMFILEEnv, name)
	c, err := net.Dial("unix", filepath.Join(runDir, name+".stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The accept of this connection fails for want of a descriptor.
	child.WaitLog(t, 20*time.Second, "stats socket: accept failed", "too many open files")
	child.Free(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if string(b) != "\"ok\"\n" {
		t.Errorf("stats after the descriptors came back: %q, %v; want \"ok\"", b, err)
	}
}
