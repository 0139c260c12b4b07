package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestStockWireguardGoOnWgpio runs stock wireguard-go on wgpio's bind and
// PortDevice in the demo topology's gateway namespace, against stock
// wireguard-go on kernel sockets and a kernel TUN in the other.
func TestStockWireguardGoOnWgpio(t *testing.T) {
	wg := testenv.Tool(t, "wg", "wireguard-tools")
	tp := testenv.Topology(t, "xw")
	testenv.Tool(t, "ping", "iputils-ping")
	s, err := twosite.Build(tp, twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Stock.PinBind(); err != nil {
		t.Fatal(err)
	}
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
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.HostB.Ping(twosite.HostA4, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
		t.Fatal(err)
	}
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
