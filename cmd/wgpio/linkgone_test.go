//go:build linux

package main

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
)

// waitExit waits for g to exit, a minute bounding only its never doing
// so, and returns its exit status.
func waitExit(t *testing.T, g *gw, after string) int {
	t.Helper()
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		t.Fatalf("wgpio up still running a minute after %s:\n%s", after, g.output())
	}
	var ee *exec.ExitError
	if !errors.As(g.err, &ee) {
		if g.err != nil {
			t.Fatalf("wgpio up: %v", g.err)
		}
		return 0
	}
	return ee.ExitCode()
}

// checkGone checks what `wgpio up` leaves after it stopped: no XDP
// program on devs (the interfaces left), no TUN, none of its socket, run,
// lock and offload record files.
func (s *site) checkGone(t *testing.T, devs ...string) {
	t.Helper()
	for _, dev := range devs {
		if xdpAttached(t, s.GwA, dev) {
			out, _ := s.GwA.Run("ip", "link", "show", "dev", dev)
			t.Errorf("XDP still attached to %s:\n%s", dev, out)
		}
	}
	if _, err := s.GwA.Run("ip", "link", "show", "dev", s.GwName); err == nil {
		t.Errorf("the TUN %s is still there", s.GwName)
	}
	paths := []string{"/var/run/wireguard/" + s.GwName + ".sock", filepath.Join(runDir, s.GwName+".stats"),
		filepath.Join(runDir, s.GwName+".capture"), filepath.Join(runDir, "name-"+s.GwName+".lock")}
	for _, dev := range []string{s.WANA, s.LANA} {
		paths = append(paths, filepath.Join(runDir, "if-"+nsInode(t, s)+"-"+dev+".lock"))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if recs := s.offloadRecords(t); len(recs) > 0 {
		t.Errorf("records of RX VLAN offload changes still there: %v", recs)
	}
}

// TestUpExitsWhenLinkGone: the LAN veth deleted under a running `wgpio
// up` in fast-path mode, or the WAN veth in compat mode, ends it, after
// its clean shutdown (final counters logged; no XDP program left on the
// other interface, no exception TUN, socket, run or lock file), with
// status 1 and the error printed as other fatal errors are, so that its
// service (Restart=on-failure) starts it again; started again meanwhile,
// it fails with the error of an interface missing. Before, the process
// ran on with its sockets on an interface that no longer existed,
// logging nothing.
func TestUpExitsWhenLinkGone(t *testing.T) {
	for _, c := range []struct {
		mode config.Mode
		side string
	}{{config.ModeFastPath, "LAN"}, {config.ModeCompat, "WAN"}} {
		t.Run(string(c.mode), func(t *testing.T) {
			s := newSite(t, func(f *config.File) { f.WGPIO.Mode = c.mode })
			gone, left := s.LANA, s.WANA
			if c.side == "WAN" {
				gone, left = s.WANA, s.LANA
			}
			g := s.up(t)
			s.pingBoth(t)
			if out, err := s.GwA.Run("ip", "link", "del", "dev", gone); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if code := waitExit(t, g, "ip link del "+gone); code != 1 {
				t.Errorf("exit status %d after the %s was deleted, want 1", code, c.side)
			}
			out := g.output()
			for _, want := range []string{
				"level=ERROR msg=\"" + c.side + " interface " + gone + " was deleted (or moved to another network namespace): the gateway's " + c.side + " AF_XDP sockets and XDP program were on it",
				"stopping so that the service restarts the gateway",
				"final counters",
				"wgpio: " + c.side + " interface " + gone + " was deleted (or moved to another network namespace) while the gateway ran\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("wgpio up output lacks %q:\n%s", want, out)
				}
			}
			s.checkGone(t, left)
			again, err := s.GwA.Command(wgpioBin, "up", "-c", s.conf).CombinedOutput()
			if err == nil || !strings.Contains(string(again), `no interface "`+gone+`"`) {
				t.Errorf("wgpio up without the %s: %v\n%s\nwant the no-interface error naming %s", c.side, err, again, gone)
			}
		})
	}
}

// TestUpCompatMQTUNExitsWhenTUNGone: in compat-mqtun, the TUN deleted (ip
// link del NAME) makes stock wireguard-go close its device; `wgpio up`
// then logs it at error level, shuts down and exits with status 1, the
// error printed, leaving no socket, run or lock file. Before, it ran on
// without a tunnel. Its LAN and WAN are no failure in this mode (kernel
// UDP sockets bound to no interface, kernel routing), and not tested.
func TestUpCompatMQTUNExitsWhenTUNGone(t *testing.T) {
	s := newSite(t, func(f *config.File) { f.WGPIO.Mode = config.ModeCompatMQTUN })
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	g := s.up(t)
	s.pingBoth(t)
	if out, err := s.GwA.Run("ip", "link", "del", "dev", s.GwName); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if code := waitExit(t, g, "ip link del "+s.GwName); code != 1 {
		t.Errorf("exit status %d after the TUN was deleted, want 1", code)
	}
	out := g.output()
	for _, want := range []string{
		"level=ERROR msg=\"TUN " + s.GwName + " was deleted (or moved to another network namespace): stock wireguard-go read the tunnel's packets from it and closed its device",
		"wgpio: TUN " + s.GwName + " was deleted (or moved to another network namespace) while the gateway ran\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wgpio up output lacks %q:\n%s", want, out)
		}
	}
	s.checkGone(t)
}

// TestServeReturnsFailure: serve returns the gateway's failure
// (signals.failed), no signal with it, as it returns a stop signal.
func TestServeReturnsFailure(t *testing.T) {
	sigs := testSignals(t)
	failed := make(chan error, 1)
	sigs.failed = failed
	want := errors.New("LAN interface lan0 was deleted (or moved to another network namespace) while the gateway ran")
	failed <- want
	var logs testenv.LogBuffer
	sig, err := serve(slog.New(slog.NewTextHandler(&logs, nil)), &config.File{Name: writeConfig(t)}, (&fakeDevice{}).uapi(), nil, sigs)
	if sig != nil || err != want {
		t.Errorf("serve returned %v, %v; want no signal and %v", sig, err, want)
	}
}
