//go:build linux

package fastgw_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// addAddrs adds n IPv4 addresses 198.19.<first+i/250>.<1+i%250>/32 to dev in
// ns, in one `ip -batch`.
func addAddrs(t *testing.T, ns *topo.NS, dev string, first, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "addr add 198.19.%d.%d/32 dev %s\n", first+i/250, 1+i%250, dev)
	}
	batch := filepath.Join(t.TempDir(), "addrs")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, ns, "ip", "-batch", batch)
}

// TestLANManyAddresses: a LAN interface with more IPv4 addresses than the
// LAN XDP filter holds (afxdp.MaxHostAddrs of each family) does not stop
// the gateway from starting, as it does not stop it at run time: the
// filter takes the tunnel addresses and the interface's first addresses,
// and a warning names the limit and the addresses left out. A LAN host's
// ping to an address covered is answered by the host (with AllowedIPs =
// 0.0.0.0/0: not sent into the tunnel). Before, Start failed on the map's
// size ("add host address ...: no space left on device").
func TestLANManyAddresses(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{NoFastPath: true, AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	addAddrs(t, s.GwA, s.LANA, 3, 300)
	var logs testenv.LogBuffer
	fc := s.FastConfig
	fc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatalf("start with 301 IPv4 addresses on the LAN: %v", err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0) // through the tunnel
	ping(t, s.HostA, "198.19.3.1", 0)            // the host's
	if l := logs.String(); !strings.Contains(l, "limit=256") || !strings.Contains(l, "198.19.4.50") {
		t.Errorf("no warning naming the limit (256) and an address left out (198.19.4.50) in the log:\n%s", l)
	}
	// At run time the same: with 50 fewer, all fit again.
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "addr del 198.19.4.%d/32 dev %s\n", 1+i, s.LANA)
	}
	batch := filepath.Join(t.TempDir(), "del")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, s.GwA, "ip", "-batch", batch)
	waitFor(t, "the LAN addresses all held again", func() bool {
		return strings.Contains(logs.String(), "holds all the LAN and WAN interfaces' addresses again")
	})
}

// TestLANToWANAddress: a LAN host's packets to the gateway's WAN addresses
// (SSH, monitoring) reach the host, as Linux delivers them, while a peer
// has AllowedIPs = 0.0.0.0/0, also for an address added to the WAN while
// running. Before, the LAN XDP filter gave the host only the tunnel and
// LAN addresses: they were sealed into that peer's tunnel.
func TestLANToWANAddress(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{NoFastPath: true, AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	var logs testenv.LogBuffer
	fc := s.FastConfig
	fc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.AddRoute("198.18.0.0/16", twosite.LANA4.String(), ""); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0) // through the tunnel
	ping(t, s.HostA, "198.18.1.1", 0)            // the WAN's address: the host's
	runOK(t, s.GwA, "ip", "addr", "add", "198.18.9.1/32", "dev", s.WANA)
	waitFor(t, "the new WAN address followed", func() bool {
		return strings.Contains(logs.String(), "198.18.9.1")
	})
	ping(t, s.HostA, "198.18.9.1", 0)
}
