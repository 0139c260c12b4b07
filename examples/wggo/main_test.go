//go:build linux

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
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
	checkTunnelMTU(t, s, g)
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

// checkTunnelMTU: hostA has a 1500-byte MTU, the tunnel 1420. The PortDevice
// answers a DF packet over 1420 with "fragmentation needed (mtu 1420)" from
// gwA's LAN address, fragments IPv4 packets without DF (pings of 1472 and
// 4000 bytes cross both ways), and TCP from hostA completes (iperf3), path
// MTU discovery converging on the tunnel MTU.
func checkTunnelMTU(t *testing.T, s *twosite.Site, g *compatgw.Gateway) {
	t.Helper()
	iperf := testenv.Tool(t, "iperf3", "iperf3")
	var out string
	for _, size := range []string{"1472", "4000"} {
		if out, err := s.HostA.Run("ping", "-c", "2", "-W", "2", "-M", "dont", "-s", size, twosite.HostB4.String()); err != nil {
			t.Errorf("ping -M dont -s %s hostA → hostB: %v\n%s", size, err, out)
		}
		if out, err := s.HostB.Run("ping", "-c", "2", "-W", "2", "-M", "dont", "-s", size, twosite.HostA4.String()); err != nil {
			t.Errorf("ping -M dont -s %s hostB → hostA: %v\n%s", size, err, out)
		}
	}
	// Before any "fragmentation needed": hostA has no path MTU cached.
	if g.LAN().Stats().Fragmented == 0 {
		t.Errorf("PortDevice fragmented nothing: %+v", g.LAN().Stats())
	}
	out, _ = s.HostA.Run("ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", twosite.HostB4.String())
	if !strings.Contains(out, "mtu = 1420") || !strings.Contains(out, "From "+twosite.LANA4.String()) {
		t.Errorf("ping -M do -s 1472: want frag needed (mtu = 1420) from %v, got:\n%s", twosite.LANA4, out)
	}
	// The PortDevice counts its answer after sending it: ping can print
	// it first.
	testenv.PollUntil(5*time.Second, func() bool {
		st := g.LAN().Stats()
		return st.ICMPErrors > 0 && st.Drops[tundev.PortDropOverMTU] > 0
	})
	if st := g.LAN().Stats(); st.ICMPErrors == 0 || st.Drops[tundev.PortDropOverMTU] == 0 {
		t.Errorf("PortDevice stats %+v: want an ICMP error and an over_mtu drop", st)
	}
	srv := s.HostB.Command(iperf, "-s", "-1", "-B", twosite.HostB4.String())
	if err := srv.Start(); err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var err error
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		var b []byte
		b, err = s.HostA.Command(iperf, "-c", twosite.HostB4.String(), "-n", "4M", "--connect-timeout", "2000").CombinedOutput()
		out = string(b)
		if err == nil || !strings.Contains(out, "Connection refused") {
			break
		}
	}
	if err != nil || !strings.Contains(out, "receiver") {
		t.Errorf("iperf3 TCP hostA → hostB over the 1420-byte tunnel: %v\n%s", err, out)
	}
}

// TestMain runs the example's main instead of the tests when
// testenv.MainEnv is set: TestStopsOnHangup runs the test binary so.
func TestMain(m *testing.M) { testenv.MainOrTests(m, main) }

// TestStopsOnHangup runs the example as a process, as its doc runs it
// (wggo -c NAME.conf), and closes its terminal (SIGHUP): it logs its
// counters, exits 0 and removes its UAPI socket. SIGHUP killed it, leaving
// the socket behind.
func TestStopsOnHangup(t *testing.T) {
	tp := testenv.Topology(t, "xj")
	s, err := twosite.Build(tp, twosite.Config{NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fc := s.FastConfig
	f := &config.File{
		Interface: config.Interface{PrivateKey: fc.PrivateKey, ListenPort: fc.ListenPort},
		WGPIO:     config.WGPIO{WAN: s.WANA, LAN: s.LANA},
	}
	for _, p := range fc.Peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs})
	}
	conf := filepath.Join(t.TempDir(), s.GwName+".conf")
	if err := os.WriteFile(conf, f.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "/var/run/wireguard/" + s.GwName + ".sock"
	cmd := s.GwA.Command(os.Args[0], "-c", conf)
	up := func(out string) bool { return strings.Contains(out, "stock wireguard-go on wgpio") }
	out, ok := testenv.StopWithSignal(t, cmd, up, syscall.SIGHUP)
	if !ok || !strings.Contains(out, "msg=stopping") {
		t.Errorf("the example did not log its counters and exit 0:\n%s", out)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("after the example exited, stat %s = %v, want not exist", sock, err)
		os.Remove(sock)
	}
}

// TestIgnoredKeys: a file written for `wgpio up` (Mode = fastpath, a
// FwMark, MetricsAddress, a DNS line) is started by wggo with a warning
// for each key it does not act on, where it said nothing and served no
// metrics; WAN, LAN, Mode = compat, AddressMode = shared and Address
// (the tunnel's networks), which it acts on, are not warned of.
func TestIgnoredKeys(t *testing.T) {
	const file = `[Interface]
PrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=
Address = 198.19.9.1/24
DNS = 198.19.9.53
FwMark = 0x10
[WGPIO]
Mode = fastpath
WAN = eth0
LAN = eth1
AddressMode = shared
MetricsAddress = 127.0.0.1:9586
[Peer]
PublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=
AllowedIPs = 198.19.9.2/32
`
	f, err := config.Parse("wg0.conf", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Ignored(f) {
		got = append(got, w.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{`wg0.conf:4: key "DNS"`,
		`wg0.conf:5: key "FwMark": reported by wg show, but marks no packet`,
		`wg0.conf:7: key "Mode": ignored by wggo`, `wg0.conf:11: key "MetricsAddress": ignored by wggo`} {
		if !strings.Contains(all, want) {
			t.Errorf("Ignored =\n%s\nwant a warning %q", all, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("Ignored =\n%s\nwant 4 warnings (not WAN, LAN, AddressMode = shared nor Address)", all)
	}
	f.WGPIO.Mode = config.ModeCompat
	for _, w := range Ignored(f) {
		if w.Key == "Mode" {
			t.Errorf("Mode = compat: Ignored warns %q, want nothing (wggo is compat mode)", w)
		}
	}
}
