package fastgw

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/wgpeer"
	"github.com/wgpio/wgpio/noise"
)

// site is the interop topology:
//
//	hostA ── gwA (wgpio fast path, AF_XDP) ══ [router] ══ gwB (stock wireguard-go) ── hostB
//
// All addresses are in 198.18.0.0/15 and exist only inside the namespaces.
type site struct {
	hostA, gwA, gwB, hostB, router *topo.NS
	gw                             *Gateway
	stock                          *wgpeer.Device
	gwName, stockName              string
	hostAAddr, hostBAddr           netip.Addr
	tunA, tunB                     netip.Addr
}

type siteConfig struct {
	routed bool // a router namespace between the gateways
	outer6 bool // IPv6 outer endpoints
	queues int
	ports  uint16
}

func newSite(t *testing.T, sc siteConfig) *site {
	t.Helper()
	testenv.Short(t, "builds namespaces and runs two gateways")
	tp := testenv.Topology(t, "fg")
	s := &site{
		hostA: testenv.NS(t, tp, "ha"), gwA: testenv.NS(t, tp, "ga"),
		gwB: testenv.NS(t, tp, "gb"), hostB: testenv.NS(t, tp, "hb"),
		hostAAddr: netip.MustParseAddr("198.19.1.10"), hostBAddr: netip.MustParseAddr("198.19.2.10"),
		tunA: netip.MustParseAddr("198.19.100.1"), tunB: netip.MustParseAddr("198.19.100.2"),
	}
	if sc.queues == 0 {
		sc.queues = 1
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	veth := func(a, b *topo.NS, q int) *topo.Veth {
		v, err := tp.NewVeth(a, b, topo.VethConfig{Queues: q})
		must(err)
		return v
	}
	lanA := veth(s.hostA, s.gwA, sc.queues)
	must(s.hostA.AddAddr(lanA.A, "198.19.1.10/24"))
	must(s.gwA.AddAddr(lanA.B, "198.19.1.1/24"))
	must(s.hostA.AddAddr(lanA.A, "2001:db8:1::10/64"))
	must(s.gwA.AddAddr(lanA.B, "2001:db8:1::1/64"))
	must(s.hostA.AddRoute("198.19.0.0/16", "198.19.1.1", ""))
	must(s.hostA.AddRoute("2001:db8::/32", "2001:db8:1::1", ""))

	lanB := veth(s.gwB, s.hostB, 1)
	must(s.gwB.AddAddr(lanB.A, "198.19.2.1/24"))
	must(s.hostB.AddAddr(lanB.B, "198.19.2.10/24"))
	must(s.gwB.AddAddr(lanB.A, "2001:db8:2::1/64"))
	must(s.hostB.AddAddr(lanB.B, "2001:db8:2::10/64"))
	must(s.hostB.AddRoute("default", "198.19.2.1", ""))
	must(s.hostB.AddRoute("default", "2001:db8:2::1", ""))
	must(s.gwB.Forwarding())

	var wanA *topo.Veth
	var endA, endB netip.Addr
	if !sc.routed {
		wanA = veth(s.gwA, s.gwB, sc.queues)
		must(s.gwA.AddAddr(wanA.A, "198.18.1.1/24"))
		must(s.gwB.AddAddr(wanA.B, "198.18.1.2/24"))
		must(s.gwA.AddAddr(wanA.A, "2001:db8:f::1/64"))
		must(s.gwB.AddAddr(wanA.B, "2001:db8:f::2/64"))
		endA, endB = netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.2")
		if sc.outer6 {
			endA, endB = netip.MustParseAddr("2001:db8:f::1"), netip.MustParseAddr("2001:db8:f::2")
		}
	} else {
		s.router = testenv.NS(t, tp, "rt")
		wanA = veth(s.gwA, s.router, sc.queues)
		wanB := veth(s.router, s.gwB, 1)
		must(s.gwA.AddAddr(wanA.A, "198.18.1.1/24"))
		must(s.router.AddAddr(wanA.B, "198.18.1.254/24"))
		must(s.router.AddAddr(wanB.A, "198.18.2.254/24"))
		must(s.gwB.AddAddr(wanB.B, "198.18.2.2/24"))
		must(s.gwA.AddAddr(wanA.A, "2001:db8:f1::1/64"))
		must(s.router.AddAddr(wanA.B, "2001:db8:f1::fe/64"))
		must(s.router.AddAddr(wanB.A, "2001:db8:f2::fe/64"))
		must(s.gwB.AddAddr(wanB.B, "2001:db8:f2::2/64"))
		must(s.router.Forwarding())
		must(s.gwA.AddRoute("198.18.2.0/24", "198.18.1.254", ""))
		must(s.gwB.AddRoute("198.18.1.0/24", "198.18.2.254", ""))
		must(s.gwA.AddRoute("2001:db8:f2::/64", "2001:db8:f1::fe", ""))
		must(s.gwB.AddRoute("2001:db8:f1::/64", "2001:db8:f2::fe", ""))
		endA, endB = netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.2.2")
		if sc.outer6 {
			endA, endB = netip.MustParseAddr("2001:db8:f1::1"), netip.MustParseAddr("2001:db8:f2::2")
		}
	}

	privA, _ := noise.NewPrivateKey()
	privB, _ := noise.NewPrivateKey()
	s.gwName, s.stockName = topo.UniqueName("wgpa"), topo.UniqueName("wgsb")
	var err error
	s.stock, err = wgpeer.Start(s.gwB, wgpeer.Config{
		Name: s.stockName, PrivateKey: privB, ListenPort: 51820,
		Address: netip.MustParsePrefix("198.19.100.2/24"),
		Routes:  []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("2001:db8:1::/64")},
		Peers: []wgpeer.Peer{{
			PublicKey:  privA.PublicKey(),
			Endpoint:   netip.AddrPortFrom(endA, 51820),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("198.19.100.1/32"), netip.MustParsePrefix("2001:db8:1::/64")},
		}},
	})
	must(err)
	t.Cleanup(s.stock.Close)

	must(s.gwA.Do(func() error {
		s.gw, err = Start(Config{
			Name: s.gwName, PrivateKey: privA, ListenPort: 51820,
			WAN: wanA.A, LAN: lanA.B, Queues: sc.queues, SourcePorts: sc.ports,
			Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.100.1/24")},
			Peers: []gateway.PeerConfig{{
				PublicKey:  privB.PublicKey(),
				Endpoint:   netip.AddrPortFrom(endB, 51820),
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24"), netip.MustParsePrefix("198.19.100.2/32"), netip.MustParsePrefix("2001:db8:2::/64")},
			}},
		})
		return err
	}))
	t.Cleanup(func() { s.gw.Close() })
	return s
}

func (s *site) dropsString() string {
	var b strings.Builder
	for r, n := range fastpath.TotalDrops(s.gw.Engine().Stats()) {
		if n > 0 {
			fmt.Fprintf(&b, "%v=%d ", fastpath.DropReason(r), n)
		}
	}
	return b.String()
}

// ping runs ping in ns until one reply or the timeout.
func ping(t *testing.T, ns *topo.NS, dst string, size int) {
	t.Helper()
	args := []string{"-c", "1", "-W", "1"}
	if size > 0 {
		args = append(args, "-M", "do", "-s", fmt.Sprint(size))
	}
	deadline := time.Now().Add(10 * time.Second)
	var out string
	var err error
	for time.Now().Before(deadline) {
		out, err = ns.Run("ping", append(args, dst)...)
		if err == nil {
			return
		}
	}
	t.Fatalf("ping %s from %s: %v\n%s", dst, ns.Name, err, out)
}

// tcpTransfer sends n random bytes from ns a to ns b's addr over TCP and
// compares SHA-256 sums.
func tcpTransfer(t *testing.T, a, b *topo.NS, addr netip.Addr, n int) {
	t.Helper()
	var ln net.Listener
	if err := b.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sum := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sum <- nil
			return
		}
		defer c.Close()
		h := sha256.New()
		io.Copy(h, c)
		sum <- h.Sum(nil)
	}()
	var c net.Conn
	if err := a.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	c.SetDeadline(time.Now().Add(120 * time.Second))
	if _, err := io.Copy(c, io.TeeReader(io.LimitReader(rand.Reader, int64(n)), h)); err != nil {
		t.Fatalf("TCP send: %v", err)
	}
	c.Close()
	select {
	case got := <-sum:
		if !bytes.Equal(got, h.Sum(nil)) {
			t.Fatalf("TCP transfer of %d bytes: SHA-256 differs", n)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("TCP transfer: receiver did not finish")
	}
}

func wgShow(t *testing.T, name string) string {
	t.Helper()
	testenv.Tool(t, "wg", "wireguard-tools")
	out, err := exec.Command("wg", "show", name, "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("wg show %s dump: %v\n%s", name, err, out)
	}
	return string(out)
}

func TestInteropStockWireguardGo(t *testing.T) {
	for _, sc := range []struct {
		name string
		cfg  siteConfig
	}{
		{"on-link", siteConfig{}},
		{"routed", siteConfig{routed: true}},
		{"outer-ipv6", siteConfig{outer6: true}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			s := newSite(t, sc.cfg)
			testenv.Tool(t, "ping", "iputils-ping")
			ping(t, s.hostA, "198.19.2.10", 0)
			ping(t, s.hostB, "198.19.1.10", 0)
			ping(t, s.hostA, "2001:db8:2::10", 0)
			// Full-size inner packets (1420 MTU - 28).
			ping(t, s.hostA, "198.19.2.10", 1392)
			// The gateway's own tunnel address, through the exception TUN.
			ping(t, s.hostB, "198.19.100.1", 0)
			tcpTransfer(t, s.hostA, s.hostB, s.hostBAddr, 8<<20)
			tcpTransfer(t, s.hostB, s.hostA, s.hostAAddr, 8<<20)
			dump := wgShow(t, s.gwName)
			lines := strings.Split(strings.TrimSpace(dump), "\n")
			if len(lines) != 2 {
				t.Fatalf("wg show dump has %d lines, want interface + 1 peer:\n%s", len(lines), dump)
			}
			f := strings.Split(lines[1], "\t")
			// public-key preshared endpoint allowed-ips latest-handshake rx tx keepalive
			if len(f) < 8 || f[4] == "0" || f[5] == "0" || f[6] == "0" {
				t.Errorf("wg show %s: peer line lacks handshake or transfer: %q", s.gwName, lines[1])
			}
			stockDump := wgShow(t, s.stockName)
			if !strings.Contains(stockDump, "\t") {
				t.Errorf("wg show on the stock peer: %q", stockDump)
			}
			t.Logf("wgpio drops: %s", s.dropsString())
		})
	}
}
