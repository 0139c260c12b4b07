//go:build linux

package main

import (
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
)

// TestUpCompatMQTUNRoutesFollow: compat-mqtun routes into its TUN the
// allowed IPs a wg set and a reload (SIGHUP) add while it runs, as it
// routes those of its start: before, only the start's were routed, and the
// LAN's traffic to a prefix added later took the host's default route,
// out of the WAN in cleartext, with nothing logged. Such a prefix loses
// its route when it leaves again.
func TestUpCompatMQTUNRoutesFollow(t *testing.T) {
	s := newSite(t, func(f *config.File) { f.WGPIO.Mode = config.ModeCompatMQTUN })
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	g := s.up(t)
	s.pingBoth(t)
	routed := func(p string) bool {
		out, err := s.GwA.Run("ip", "route", "show", "exact", p)
		return err == nil && strings.Contains(out, "dev "+s.GwName)
	}
	peer := s.file.Peers[0]
	var list []string
	for _, a := range peer.AllowedIPs {
		list = append(list, a.String())
	}
	wg(t, s.GwA, "set", s.GwName, "peer", peer.PublicKey.String(), "allowed-ips", strings.Join(append(list, "198.19.7.0/24"), ","))
	if !routed("198.19.7.0/24") {
		t.Errorf("198.19.7.0/24, added by wg set: no route into %s", s.GwName)
	}
	edited := *s.file
	edited.Peers = []config.Peer{peer}
	edited.Peers[0].AllowedIPs = append(append([]netip.Prefix(nil), peer.AllowedIPs...), netip.MustParsePrefix("198.19.6.0/24"))
	if err := os.WriteFile(s.conf, []byte(edited.Marshal()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a route of 198.19.6.0/24, added by a reload", func() bool { return routed("198.19.6.0/24") })
	// The prefix added while running and removed by the reload loses
	// its route (the routes stay as many as the prefixes: one set by
	// mistake, holding a peer's endpoint, goes with it); the start's
	// keep theirs (TestUpCompatMQTUN).
	waitFor(t, 10*time.Second, "198.19.7.0/24's route gone after the reload removed it", func() bool { return !routed("198.19.7.0/24") })
	// Added and removed by wg set: the route comes and goes.
	wg(t, s.GwA, "set", s.GwName, "peer", peer.PublicKey.String(), "allowed-ips", strings.Join(append(list, "198.19.6.0/24", "198.19.5.0/24"), ","))
	if !routed("198.19.5.0/24") {
		t.Errorf("198.19.5.0/24, added by wg set: no route into %s", s.GwName)
	}
	wg(t, s.GwA, "set", s.GwName, "peer", peer.PublicKey.String(), "allowed-ips", strings.Join(append(list, "198.19.6.0/24"), ","))
	if routed("198.19.5.0/24") {
		t.Errorf("198.19.5.0/24, removed by wg set: its route into %s stays", s.GwName)
	}
	if !routed("198.19.6.0/24") {
		t.Errorf("198.19.6.0/24, still configured: its route into %s is gone", s.GwName)
	}
}
