package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestUpCompat runs `wgpio up` in compat mode (stock wireguard-go on wgpio's
// bind and tundev) against stock wireguard-go: traffic both ways, wg(8)
// shows it, an allowed IP removed with wg set leaves the LAN XDP filter
// before wg returns,
// `wgpio stats` prints the two sides' counters, SIGTERM leaves no XDP
// program.
func TestUpCompat(t *testing.T) {
	s := newSite(t, func(f *config.File) { f.WGPIO.Mode = config.ModeCompat; withFwMark(f) })
	g := s.up(t)
	s.pingBoth(t)
	checkFwMark(t, s)
	if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
		t.Fatalf("IPv6: %v", err)
	}
	// The tunnel MTU is enforced: a non-DF 4000-byte ping crosses in
	// fragments; a DF one over 1420 gets "fragmentation needed (mtu 1420)"
	// from the LAN address.
	if out, err := s.HostA.Run("ping", "-c", "1", "-W", "2", "-M", "dont", "-s", "4000", twosite.HostB4.String()); err != nil {
		t.Errorf("ping -M dont -s 4000: %v\n%s", err, out)
	}
	if out, _ := s.HostA.Run("ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", twosite.HostB4.String()); !strings.Contains(out, "mtu = 1420") {
		t.Errorf("ping -M do -s 1472: want frag needed (mtu = 1420), got:\n%s", out)
	}
	stock := s.FastConfig.Peers[0].PublicKey.Base64()
	if out := wg(t, s.GwA, "show", s.GwName); !strings.Contains(out, "peer: "+stock) || !strings.Contains(out, "latest handshake") {
		t.Errorf("wg show %s:\n%s", s.GwName, out)
	}
	out, err := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "wan (bind)") || !strings.Contains(string(out), "lan (tundev)") {
		t.Errorf("wgpio stats %s: %v\n%s", s.GwName, err, out)
	}

	// Compat mode has no capture socket: wireguard-go's frames are not the
	// fast path's.
	if out, err := exec.Command(wgpioBin, "capture", "-c", "1", s.GwName).CombinedOutput(); err == nil || !strings.Contains(string(out), "not available in compat mode") {
		t.Errorf("wgpio capture on a compat gateway: %v, %s; want an error saying capture is not available", err, out)
	}

	wg(t, s.GwA, "set", s.GwName, "peer", stock, "allowed-ips", "198.19.2.0/24,198.19.100.2/32")
	// The LAN filter follows before wg returns (compatgw.handleUAPI).
	if _, err := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB6.String()); err == nil {
		t.Errorf("ping %v answered after its allowed IP was removed", twosite.HostB6)
	}
	if err := s.HostA.Ping(twosite.HostB4, 3*time.Second); err != nil {
		t.Errorf("after removing an allowed IP: %v", err)
	}

	g.cmd.Process.Signal(syscall.SIGTERM)
	<-g.done
	if g.err != nil {
		t.Errorf("exit after SIGTERM: %v", g.err)
	}
	s.checkClean(t, true)
}

// TestUpCompatMQTUN runs `wgpio up` in compat-mqtun mode (stock
// wireguard-go on a multi-queue kernel TUN and the kernel's UDP sockets):
// with forwarding off in its namespace it refuses to start and names the
// sysctls to set; with forwarding on, traffic flows both ways and `wgpio
// stats` says that the mode keeps no wgpio counters.
func TestUpCompatMQTUN(t *testing.T) {
	s := newSite(t, func(f *config.File) { f.WGPIO.Mode = config.ModeCompatMQTUN })
	out, err := s.GwA.Command(wgpioBin, "up", "-c", s.conf).CombinedOutput()
	want := "sysctl -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1"
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), s.GwName+`.conf:`) {
		t.Fatalf("wgpio up in compat-mqtun without forwarding: %v\n%s\nwant a refusal at the Mode line naming %q", err, out, want)
	}
	t.Logf("without forwarding: %s", out)
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	g := s.up(t)
	s.pingBoth(t)
	if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
		t.Errorf("IPv6: %v", err)
	}
	out, err = exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "compat-mqtun keeps no wgpio counters") || !strings.Contains(string(out), "wg show "+s.GwName) {
		t.Errorf("wgpio stats %s: %v\n%s\nwant it to say the mode keeps no counters", s.GwName, err, out)
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	<-g.done
	if g.err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", g.err, g.output())
	}
}
