package fastgw_test

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
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/demo"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

func newSite(t *testing.T, sc demo.SiteConfig) *demo.Site {
	t.Helper()
	testenv.Short(t, "builds namespaces and runs two gateways")
	tp := testenv.Topology(t, "fg")
	s, err := demo.BuildSite(tp, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func dropsString(g *fastgw.Gateway) string {
	var b strings.Builder
	for r, n := range fastpath.TotalDrops(g.Engine().Stats()) {
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
		cfg  demo.SiteConfig
	}{
		{"on-link", demo.SiteConfig{}},
		{"routed", demo.SiteConfig{Routed: true}},
		{"outer-ipv6", demo.SiteConfig{Outer6: true}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			s := newSite(t, sc.cfg)
			testenv.Tool(t, "ping", "iputils-ping")
			ping(t, s.HostA, "198.19.2.10", 0)
			ping(t, s.HostB, "198.19.1.10", 0)
			ping(t, s.HostA, "2001:db8:2::10", 0)
			// Full-size inner packets (1420 MTU - 28).
			ping(t, s.HostA, "198.19.2.10", 1392)
			// The gateway's own tunnel address, through the exception TUN.
			ping(t, s.HostB, "198.19.100.1", 0)
			tcpTransfer(t, s.HostA, s.HostB, demo.HostB4, 8<<20)
			tcpTransfer(t, s.HostB, s.HostA, demo.HostA4, 8<<20)
			dump := wgShow(t, s.GwName)
			lines := strings.Split(strings.TrimSpace(dump), "\n")
			if len(lines) != 2 {
				t.Fatalf("wg show dump has %d lines, want interface + 1 peer:\n%s", len(lines), dump)
			}
			f := strings.Split(lines[1], "\t")
			// public-key preshared endpoint allowed-ips latest-handshake rx tx keepalive
			if len(f) < 8 || f[4] == "0" || f[5] == "0" || f[6] == "0" {
				t.Errorf("wg show %s: peer line lacks handshake or transfer: %q", s.GwName, lines[1])
			}
			stockDump := wgShow(t, s.StockName)
			if !strings.Contains(stockDump, "\t") {
				t.Errorf("wg show on the stock peer: %q", stockDump)
			}
			t.Logf("wgpio drops: %s", dropsString(s.Gateway))
		})
	}
}
