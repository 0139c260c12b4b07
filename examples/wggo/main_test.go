package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/internal/demo"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

func ping(t *testing.T, ns *topo.NS, dst string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := ns.Run("ping", "-c", "1", "-W", "1", dst)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer in %v: %v", timeout, err)
		}
	}
}

// TestStockWireguardGoOnWgpio runs stock wireguard-go on wgpio's bind and
// PortDevice in the demo topology's gateway namespace, against stock
// wireguard-go on kernel sockets and a kernel TUN in the other.
func TestStockWireguardGoOnWgpio(t *testing.T) {
	wg := testenv.Tool(t, "wg", "wireguard-tools")
	tp := testenv.Topology(t, "xw")
	s, err := demo.BuildSite(tp, demo.SiteConfig{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	stockBindInNS(t, s)
	fc := s.FastConfig
	f := &config.File{
		Interface: config.Interface{PrivateKey: fc.PrivateKey, ListenPort: fc.ListenPort},
		WGPIO:     config.WGPIO{WAN: s.WANA, LAN: s.LANA},
	}
	for _, p := range fc.Peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs})
	}
	var g *compatgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(f, s.GwName, slog.New(slog.DiscardHandler))
		return err
	}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			g.Close()
		}
	}()
	ping(t, s.HostA, demo.HostB4.String(), 15*time.Second)
	ping(t, s.HostB, demo.HostA4.String(), 5*time.Second)
	ping(t, s.HostA, demo.HostB6.String(), 5*time.Second)
	out, err := s.GwA.Run(wg, "show", s.GwName)
	if err != nil || !strings.Contains(out, "peer: "+fc.Peers[0].PublicKey.Base64()) || !strings.Contains(out, "latest handshake") {
		t.Errorf("wg show %s: %v\n%s", s.GwName, err, out)
	}
	if st := g.Bind().Stats(); st.RXPackets == 0 || st.TXPackets == 0 {
		t.Errorf("bind RX %d, TX %d; want both > 0", st.RXPackets, st.TXPackets)
	}
	g.Close()
	closed = true
	for _, dev := range []string{s.WANA, s.LANA} {
		if out, _ := s.GwA.Run("ip", "link", "show", "dev", dev); strings.Contains(out, "xdp") {
			t.Errorf("XDP still attached to %s after Close:\n%s", dev, out)
		}
	}
}

// stockBindInNS makes sure the stock wireguard-go peer's UDP socket lives in
// gwB's namespace. internal/testing/wgpeer brings the peer's TUN up after
// device.Up; wireguard-go handles that TUN event (device/tun.go: EventUp →
// Device.Up → BindUpdate) on a goroutine whose OS thread may be in any
// namespace, so the socket is sometimes reopened outside gwB and the peer
// never answers. Reopen it from inside gwB until it stays there.
func stockBindInNS(t testing.TB, s *demo.Site) {
	t.Helper()
	listening := func() bool {
		out, err := s.GwB.Run("ss", "-Huln", "sport", "= :51820")
		return err == nil && strings.Contains(out, "51820")
	}
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		if listening() {
			time.Sleep(200 * time.Millisecond)
			if listening() {
				return
			}
		}
		if err := s.GwB.Do(s.Stock.Dev.BindUpdate); err != nil {
			t.Fatalf("reopen the stock peer's bind in %s: %v", s.GwB.Name, err)
		}
	}
	t.Fatalf("the stock peer's UDP socket is not in %s", s.GwB.Name)
}
