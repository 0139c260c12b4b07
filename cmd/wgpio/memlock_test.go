//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestUpMemlockLow starts the gateway as root without CAP_IPC_LOCK and
// CAP_SYS_RESOURCE (taken from the bounding set, as a container's root
// often runs) under RLIMIT_MEMLOCK of 8 MiB, a common default: the
// kernel charges the 68 MiB UMEM to the limit (net/xdp/xdp_umem.c,
// xdp_umem_account_pages) and refuses it. The start fails at once with
// the limit, the fixes, and the smaller UMEM in the binary's terms (fewer
// Queues), not the library's (fastgw's Config.Frames, afxdp's
// Config.NumFrames), which no key sets; nothing is left attached.
func TestUpMemlockLow(t *testing.T) {
	testenv.Tool(t, "setpriv", "util-linux")
	s := newSite(t, nil)
	script := `ulimit -l 8192 && exec setpriv --bounding-set=-ipc_lock,-sys_resource "$1" up -c "$2"`
	cmd := s.GwA.Command("sh", "-c", script, "sh", wgpioBin, s.conf)
	g := start(t, cmd)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("wgpio up under an 8 MiB RLIMIT_MEMLOCK without CAP_IPC_LOCK still runs after 30 s:\n%s", g.output())
	}
	out := g.output()
	if g.err == nil {
		t.Fatalf("wgpio up under an 8 MiB RLIMIT_MEMLOCK without CAP_IPC_LOCK exited 0:\n%s", out)
	}
	for _, want := range []string{"RLIMIT_MEMLOCK too low (now 8192 KiB", "LimitMEMLOCK=infinity", "CAP_IPC_LOCK", "run fewer queues, with Queues in [WGPIO] or -queues"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "LimitMEMLOCK=infinity"); n != 1 {
		t.Errorf("the fix given %d times, want once:\n%s", n, out)
	}
	for _, bad := range []string{"NumFrames", "Config.Frames", "Config.Queues"} {
		if strings.Contains(out, bad) {
			t.Errorf("output names the library's %s, which no key or flag sets:\n%s", bad, out)
		}
	}
	for _, dev := range []string{s.FastConfig.WAN, s.FastConfig.LAN} {
		if out, err := s.GwA.Run("ip", "link", "show", "dev", dev); err != nil || strings.Contains(out, "xdp") {
			t.Errorf("%s after the failed start: %v\n%s", dev, err, out)
		}
	}
}
