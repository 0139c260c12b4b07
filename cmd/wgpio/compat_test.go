//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestUpCompat runs `wgpio up` in compat mode (stock wireguard-go on wgpio's
// bind and tundev) against stock wireguard-go: traffic both ways, wg(8)
// shows it, the LAN's traffic to an allowed IP removed with wg set is
// dropped and counted by tundev (no_route) from before wg returns,
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
	// The JSON lists wireguard-go's peers, as the fast path's.
	checkCompatPeersJSON(t, s.GwName, stock)
	// The XDP programs' counters, as in fastpath mode: what they gave the
	// bind and tundev, and what they left to the kernel (a frame that is
	// not IP, a truncated header), which no other counter of compat mode
	// shows.
	for _, want := range []string{"xdp lan: ", "xdp_redirect_prefix=", "xdp wan: ", "xdp_redirect_udp="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("wgpio stats %s does not say %q:\n%s", s.GwName, want, out)
		}
	}

	// Compat mode has no capture socket: wireguard-go's frames are not the
	// fast path's.
	if out, err := exec.Command(wgpioBin, "capture", "-c", "1", s.GwName).CombinedOutput(); err == nil || !strings.Contains(string(out), "not available in compat mode") {
		t.Errorf("wgpio capture on a compat gateway: %v, %s; want an error saying capture is not available", err, out)
	}

	wg(t, s.GwA, "set", s.GwName, "peer", stock, "allowed-ips", "198.19.2.0/24,198.19.100.2/32")
	// The LAN filter and tundev follow before wg returns
	// (compatgw.handleUAPI): the prefix stays in the filter, tundev
	// drops its packets.
	if _, err := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB6.String()); err == nil {
		t.Errorf("ping %v answered after its allowed IP was removed", twosite.HostB6)
	}
	// ping gives up after a second, which does not wait for tundev's read.
	if !testenv.PollUntil(20*time.Second, func() bool {
		out, err = exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
		return err == nil && strings.Contains(string(out), "no_route=")
	}) {
		t.Errorf("wgpio stats %s after a ping to a removed allowed IP: %v\n%s\nwant tundev's no_route drops", s.GwName, err, out)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
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
// stats` prints the TUN's counters. A peer removed with wg set keeps its
// routes into the TUN, as wg-quick's into wg0: the LAN's traffic to its
// allowed IPs goes into the TUN (its TX counter), where it is dropped
// and counted as no_route from before wg returns (wireguard-go would
// drop it uncounted), answered with host unreachable from the LAN
// address as Linux's wg0 answers, and never leaves the WAN by the host's
// default route in cleartext.
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
	g := s.up(t, "-metrics-addr", metricsAddr)
	s.pingBoth(t)
	if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
		t.Errorf("IPv6: %v", err)
	}
	checkCompatPeersJSON(t, s.GwName, s.FastConfig.Peers[0].PublicKey.Base64())
	// /metrics has the peers too (MetricsPeers: the default, 1,000).
	body := httpGet(t, s, metricsAddr, "/metrics")
	if want := `wgpio_peers{device="` + s.GwName + `"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, body)
	}
	if m := regexp.MustCompile(`wgpio_peer_last_handshake_seconds\{device="` + s.GwName + `",public_key="` + regexp.QuoteMeta(s.FastConfig.Peers[0].PublicKey.Base64()) + `"\} (\S+)`).FindStringSubmatch(body); m == nil || m[1] == "0" {
		t.Errorf("/metrics: no last handshake of the peer:\n%s", body)
	}
	out, err = exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "lan (tun "+s.GwName+")") || !strings.Contains(string(out), "wan (udp sockets)") || !strings.Contains(string(out), "wg show "+s.GwName) {
		t.Errorf("wgpio stats %s: %v\n%s\nwant the TUN's and the UDP sockets' counters and a pointer to wg show", s.GwName, err, out)
	}

	if err := s.GwA.AddRoute("default", "198.18.1.2", ""); err != nil {
		t.Fatal(err)
	}
	wan := startInnerCapture(t, s.GwA, s.WANA)
	wg(t, s.GwA, "set", s.GwName, "peer", s.FastConfig.Peers[0].PublicKey.String(), "remove")
	if routes, err := s.GwA.Run("ip", "route", "show", "dev", s.GwName); err != nil || !strings.Contains(routes, "198.19.2.0/24") {
		t.Errorf("after the peer's removal, the routes into %s (%v):\n%s\nwant 198.19.2.0/24 still", s.GwName, err, routes)
	}
	before := tunTX(t, s)
	const n = 20
	// At once (preload), within one interval of the rate limit also on a
	// busy machine, where pings 10 ms apart could spread over more.
	pings, _ := s.HostA.Run("ping", "-n", "-c", fmt.Sprint(n), "-l", fmt.Sprint(n), "-W", "1", twosite.HostB4.String())
	if got := tunTX(t, s) - before; got < n {
		t.Errorf("%d pings to the removed peer's allowed IPs, %d packets into %s", n, got, s.GwName)
	}
	// Answered as Linux's wg0 answers them: host unreachable from the
	// gateway's LAN address (the kernel's choice), 6 at once (the
	// per-destination burst), the rest suppressed.
	unreach := 0
	for _, l := range strings.Split(pings, "\n") {
		if strings.Contains(l, "Unreachable") {
			if !strings.HasPrefix(l, "From "+twosite.LANA4.String()+" ") {
				t.Errorf("answer %q, want one from %s", l, twosite.LANA4)
			}
			unreach++
		}
	}
	if unreach != 6 {
		t.Errorf("%d pings to the removed peer's allowed IPs: %d host unreachable, want 6:\n%s", n, unreach, pings)
	}
	// ping gives up a second after its last echo request, which on a
	// busy machine the gateway may not have read yet; and it counts a
	// batch's drops after answering them: wait until all 20 are counted
	// (dropped, and answered or suppressed).
	var st GatewayStats
	testenv.PollUntil(10*time.Second, func() bool {
		st = GatewayStats{}
		out, err = exec.Command(wgpioBin, "stats", "-json", s.GwName).CombinedOutput()
		if err == nil {
			err = json.Unmarshal(out, &st)
		}
		return err != nil || st.TUN != nil && st.TUN.Drops[tundev.TUNDropNoRoute] >= n && st.TUN.ICMPErrors+st.TUN.ICMPSuppressed >= n
	})
	if err != nil || st.TUN == nil || st.TUN.Drops[tundev.TUNDropNoRoute] < n || st.TUN.ICMPErrors != 6 || st.TUN.ICMPSuppressed < n-6 {
		t.Errorf("wgpio stats -json %s after %d pings to the removed peer's allowed IPs: %v\n%s\nwant at least %d no_route drops of the TUN, 6 ICMP errors, %d suppressed", s.GwName, n, err, out, n, n-6)
	}
	body = httpGet(t, s, metricsAddr, "/metrics")
	m := regexp.MustCompile(`wgpio_tun_drops_total\{device="` + s.GwName + `",reason="no_route"\} (\d+)`).FindStringSubmatch(body)
	got := -1 // no such series
	if m != nil {
		got, _ = strconv.Atoi(m[1])
	}
	if got < n {
		t.Errorf("/metrics: the TUN's no_route drops = %d, want at least %d:\n%s", got, n, body)
	}
	if want := `wgpio_tun_icmp_errors_sent_total{device="` + s.GwName + `"} 6`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, body)
	}
	if leaks := wan.stop(t); len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d packets with inner addresses left the WAN; the first: %s", len(leaks), leaks[0])
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	<-g.done
	if g.err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", g.err, g.output())
	}
	// Its counters at the stop, as the other modes log theirs (it
	// logged none).
	if out := g.output(); !strings.Contains(out, "final counters") || !strings.Contains(out, "tun_drops=") {
		t.Errorf("no final counters with the TUN's drops logged at the stop:\n%s", out)
	}
}

// tunTX is the TX packet counter of gwA's TUN: what the kernel routed
// into it.
func tunTX(t *testing.T, s *site) uint64 {
	t.Helper()
	out, err := s.GwA.Run("cat", "/sys/class/net/"+s.GwName+"/statistics/tx_packets")
	if err != nil {
		t.Fatalf("TX counter of %s: %v\n%s", s.GwName, err, out)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// innerCapture is a tcpdump of the packets with an address of the sites'
// inner networks (198.19.0.0/16) on an interface.
type innerCapture struct {
	ns   *topo.NS
	cmd  *exec.Cmd
	bin  string
	file string
	done bool
}

// startInnerCapture runs tcpdump on dev in ns and returns once it
// captures. In immediate mode: otherwise the kernel hands tcpdump its
// frames a ring block at a time (TPACKET_V3, with a timeout), and one
// interrupted meanwhile writes none of the last block's (a leak there
// went unseen).
func startInnerCapture(t *testing.T, ns *topo.NS, dev string) *innerCapture {
	t.Helper()
	c := &innerCapture{ns: ns, bin: testenv.Tool(t, "tcpdump", "tcpdump"), file: t.TempDir() + "/inner.pcap"}
	c.cmd = ns.Command(c.bin, "-i", dev, "-n", "-U", "--immediate-mode", "-w", c.file, "net", "198.19.0.0/16")
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.halt() })
	ready := make(chan []byte, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := stderr.Read(buf)
			got = append(got, buf[:n]...)
			if bytes.Contains(got, []byte("listening on")) || err != nil {
				ready <- got
				io.Copy(io.Discard, stderr)
				return
			}
		}
	}()
	select {
	case got := <-ready:
		if !bytes.Contains(got, []byte("listening on")) {
			t.Fatalf("tcpdump on %s: %s", dev, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("tcpdump on %s did not start within 10 s", dev)
	}
	return c
}

func (c *innerCapture) halt() {
	if !c.done {
		c.done = true
		c.cmd.Process.Signal(os.Interrupt)
		c.cmd.Wait()
	}
}

// stop ends the capture and returns tcpdump's line for each packet.
func (c *innerCapture) stop(t *testing.T) []string {
	t.Helper()
	c.halt()
	out, err := c.ns.Run(c.bin, "-n", "-r", c.file)
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "reading from file") {
			lines = append(lines, l)
		}
	}
	return lines
}

// checkCompatPeersJSON checks that `wgpio stats -json NAME` of a compat
// mode lists the one peer, whose public key is peer, with its handshake
// and bytes, and counts it in peers_configured.
func checkCompatPeersJSON(t *testing.T, name, peer string) {
	t.Helper()
	out, err := exec.Command(wgpioBin, "stats", "-json", name).CombinedOutput()
	var st GatewayStats
	if err == nil {
		err = json.Unmarshal(out, &st)
	}
	if err != nil || len(st.Peers) != 1 || st.PeersConfigured == nil || *st.PeersConfigured != 1 {
		t.Fatalf("wgpio stats -json %s: %v\n%s\nwant one peer listed and counted", name, err, out)
	}
	if p := st.Peers[0]; p.PublicKey != peer || p.LastHandshake.IsZero() || p.RxBytes == 0 || p.TxBytes == 0 || p.Endpoint == "" {
		t.Errorf("wgpio stats -json %s: peer %+v, want %s with its handshake, bytes and endpoint", name, p, peer)
	}
}
