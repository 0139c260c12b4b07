//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

const metricsAddr = "127.0.0.1:9586" // inside gwA's own namespace

// TestUpWithStockPeer runs `wgpio up` in gwA against stock wireguard-go in
// gwB: traffic both ways; wg(8) shows and changes it live (a new peer, an
// allowed IP removed, the endpoint moved to IPv6) without dropping the
// tunnel; `wgpio stats`, the metrics endpoint and `wgpio capture` see it;
// the file's FwMark is reported, as a Linux wg0 reports it.
func TestUpWithStockPeer(t *testing.T) {
	s := newSite(t, withFwMark)
	s.up(t, "-metrics-addr", metricsAddr)
	s.pingBoth(t)
	if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
		t.Fatalf("IPv6 inner before wg set: %v", err)
	}

	stock := s.FastConfig.Peers[0].PublicKey.Base64()
	checkFwMark(t, s)
	show := wg(t, s.GwA, "show", s.GwName)
	for _, want := range []string{"interface: " + s.GwName, "listening port: 51820", "peer: " + stock, "latest handshake", "198.19.2.0/24"} {
		if !strings.Contains(show, want) {
			t.Errorf("wg show %s lacks %q:\n%s", s.GwName, want, show)
		}
	}

	t.Run("add-peer", func(t *testing.T) {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub := k.PublicKey().Base64()
		wg(t, s.GwA, "set", s.GwName, "peer", pub, "allowed-ips", "198.19.50.0/24", "endpoint", "198.18.1.2:51999")
		if got := wg(t, s.GwA, "show", s.GwName, "peers"); !strings.Contains(got, pub) {
			t.Errorf("wg show %s peers = %q, want it to list %s", s.GwName, got, pub)
		}
		if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
			t.Errorf("after adding a peer: %v", err)
		}
	})
	t.Run("remove-allowed-ip", func(t *testing.T) {
		wg(t, s.GwA, "set", s.GwName, "peer", stock, "allowed-ips", "198.19.2.0/24,198.19.100.2/32")
		got := wg(t, s.GwA, "show", s.GwName, "allowed-ips")
		if strings.Contains(got, "2001:db8:2::/64") || !strings.Contains(got, "198.19.2.0/24") {
			t.Errorf("wg show allowed-ips = %q, want 198.19.2.0/24 and no 2001:db8:2::/64", got)
		}
		if _, err := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB6.String()); err == nil {
			t.Errorf("ping %v answered after its allowed IP was removed", twosite.HostB6)
		}
		if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
			t.Errorf("after removing an allowed IP: %v", err)
		}
	})
	t.Run("change-endpoint", func(t *testing.T) {
		// The gateway resolves a configured endpoint's MAC once, when it is
		// set (gateway.Device.setEndpointConfigLocked); an unknown one is
		// not retried until the next handshake. Have the kernel's neighbour
		// table (which the gateway mirrors) know it first.
		if _, err := s.GwA.Run("ping", "-c", "1", "-W", "1", "2001:db8:f::2"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		wg(t, s.GwA, "set", s.GwName, "peer", stock, "endpoint", "[2001:db8:f::2]:51820")
		if got := wg(t, s.GwA, "show", s.GwName, "endpoints"); !strings.Contains(got, "[2001:db8:f::2]:51820") {
			t.Errorf("wg show endpoints = %q, want [2001:db8:f::2]:51820", got)
		}
		if err := s.HostA.Ping(twosite.HostB4, 5*time.Second); err != nil {
			st, _ := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
			neigh, _ := s.GwA.Run("ip", "-6", "neigh")
			t.Fatalf("after moving the endpoint: %v\nwgpio stats:\n%s\nneighbours:\n%s\nwg show:\n%s", err, st, neigh, wg(t, s.GwA, "show", s.GwName))
		}
		// gwB roams to our IPv6 address and answers there.
		if got := wg(t, s.GwB, "show", s.StockName, "endpoints"); !strings.Contains(got, "[2001:db8:f::1]:51820") {
			t.Errorf("stock peer's endpoint for us = %q, want [2001:db8:f::1]:51820", got)
		}
	})

	t.Run("stats", func(t *testing.T) {
		out, err := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
		if err != nil {
			t.Fatalf("wgpio stats %s: %v\n%s", s.GwName, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 3 || lines[0] != "gateway "+s.GwName || !strings.HasPrefix(lines[1], "queue") {
			t.Fatalf("wgpio stats = %q, want a header and one line per queue", out)
		}
		if !strings.Contains(string(out), "sessions: 1 live,") {
			t.Errorf("wgpio stats = %q, want a line \"sessions: 1 live, ...\"", out)
		}
		var q, enc, dec uint64
		if _, err := fmt.Sscan(lines[2], &q, &enc, &dec); err != nil || q != 0 || enc == 0 || dec == 0 {
			t.Errorf("queue line %q: queue %d encrypted %d decrypted %d (%v); want queue 0 with both > 0", lines[2], q, enc, dec, err)
		}
		// The XDP programs' verdicts: the LAN redirected the pings.
		if !strings.Contains(string(out), "xdp lan: ") || !strings.Contains(string(out), "xdp_redirect_prefix=") {
			t.Errorf("wgpio stats lacks the LAN XDP counters:\n%s", out)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		body := httpGet(t, s, metricsAddr, "/metrics")
		for _, want := range []string{
			`wgpio_packets_encrypted_total{device="` + s.GwName + `",queue="0"}`,
			`wgpio_packets_decrypted_total{device="` + s.GwName + `",queue="0"}`,
			`wgpio_drops_total{`, `wgpio_port_receive_packets_total{`, `wgpio_peer_last_handshake_seconds{`,
			`wgpio_xdp_frames_total{device="` + s.GwName + `",port="lan",verdict="pass_vlan"}`,
			`wgpio_live_sessions{device="` + s.GwName + `"} 1`, `wgpio_keypairs_installed_total{`,
			`wgpio_responder_keypairs_expired_unconfirmed_total{`,
			// The kernel's counters of the AF_XDP sockets (rx_ring_full:
			// the workers did not keep up).
			`wgpio_port_kernel_drops_total{device="` + s.GwName + `",port="wan",queue="0",reason="rx_ring_full"}`,
			`wgpio_port_kernel_drops_total{device="` + s.GwName + `",port="lan",queue="0",reason="rx_dropped"}`,
			`wgpio_port_fill_ring_empty_total{device="` + s.GwName + `",port="lan",queue="0"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
	t.Run("capture", func(t *testing.T) {
		testCapture(t, s)
	})
	t.Run("capture-stdout", func(t *testing.T) {
		// LAN RX, ICMP to hostB, to stdout: the pings hostA sends.
		capt := exec.Command(wgpioBin, "capture", "-port", "lan", "-dir", "rx", "-proto", "icmp", "-host", twosite.HostB4.String(), "-c", "2", s.GwName)
		var stdout, stderr strings.Builder
		capt.Stdout, capt.Stderr = &stdout, &stderr
		if err := capt.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- capt.Wait() }()
		timeout := time.After(10 * time.Second)
	loop:
		for {
			s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB4.String())
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("wgpio capture: %v\n%s", err, stderr.String())
				}
				break loop
			case <-timeout:
				capt.Process.Kill()
				t.Fatalf("wgpio capture did not get 2 frames in 10 s:\n%s", stderr.String())
			default:
			}
		}
		pkts := readPCAPNG(t, []byte(stdout.String()))
		for i, p := range pkts {
			// Ethernet, IPv4 (protocol at 14+9 = 1, ICMP), to hostB,
			// received on the LAN.
			if len(p.data) < 34 || p.data[23] != 1 || !bytes.Equal(p.data[30:34], twosite.HostB4.AsSlice()) || p.iface != 0 || p.flags != 1 {
				t.Errorf("packet %d is not ICMP to %v received on the LAN: interface %d, flags %#x, %x", i, twosite.HostB4, p.iface, p.flags, p.data)
			}
		}
		if len(pkts) != 2 || !strings.Contains(stderr.String(), "2 frames captured") {
			t.Errorf("stdout holds %d packets, stderr %q; want 2", len(pkts), stderr.String())
		}
	})
	// The tunnel is still up after every change.
	s.pingBoth(t)
}

// httpGet fetches path from addr inside gwA's namespace (net/http dials
// from other goroutines, which would leave the namespace: one request by
// hand).
func httpGet(t *testing.T, s *site, addr, path string) string {
	t.Helper()
	var c net.Conn
	if err := s.GwA.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect to the metrics endpoint %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr)
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "HTTP/1.0 200") {
		t.Fatalf("GET %s = %.200q, want 200", path, b)
	}
	return string(b)
}

type capturedPacket struct {
	iface, flags uint32
	data         []byte
}

// readPCAPNG parses a pcapng stream as `wgpio capture` writes it: a
// section header, the two interfaces (lan, wan, Ethernet), and enhanced
// packet blocks with epb_flags.
func readPCAPNG(t *testing.T, b []byte) []capturedPacket {
	t.Helper()
	var out []capturedPacket
	var ifaces []string
	for off := 0; off < len(b); {
		if off+12 > len(b) {
			t.Fatalf("block at %d cut short", off)
		}
		typ, n := binary.LittleEndian.Uint32(b[off:]), int(binary.LittleEndian.Uint32(b[off+4:]))
		if n < 12 || off+n > len(b) || binary.LittleEndian.Uint32(b[off+n-4:]) != uint32(n) {
			t.Fatalf("block at %d: type %#x, bad length %d", off, typ, n)
		}
		body := b[off+8 : off+n-4]
		switch {
		case off == 0 && (typ != blockSHB || binary.LittleEndian.Uint32(body) != byteOrderMagic):
			t.Fatalf("stream does not start with a little-endian section header: %x", b[:min(len(b), 32)])
		case typ == blockIDB:
			if binary.LittleEndian.Uint16(body) != linkTypeEthernet {
				t.Errorf("interface %d link type %d, want Ethernet", len(ifaces), binary.LittleEndian.Uint16(body))
			}
			ifaces = append(ifaces, string(body[12:15])) // the if_name option's value
		case typ == blockEPB:
			incl := int(binary.LittleEndian.Uint32(body[12:]))
			p := capturedPacket{iface: binary.LittleEndian.Uint32(body), data: body[20 : 20+incl]}
			opts := body[20+incl+(4-incl%4)%4:]
			if len(opts) >= 8 && binary.LittleEndian.Uint16(opts) == optEPBFlags {
				p.flags = binary.LittleEndian.Uint32(opts[4:])
			}
			out = append(out, p)
		}
		off += n
	}
	if !slices.Equal(ifaces, []string{"lan", "wan"}) {
		t.Errorf("interfaces %q, want lan and wan", ifaces)
	}
	return out
}

// testCapture runs `wgpio capture` on the WAN while pings flow and reads the
// pcapng file back with its own parser and with tcpdump.
func testCapture(t *testing.T, s *site) {
	file := filepath.Join(t.TempDir(), "wan.pcapng")
	capt := exec.Command(wgpioBin, "capture", s.GwName, "-port", "wan", "-dir", "tx", "-proto", "udp", "-c", "4", "-w", file)
	var out strings.Builder
	capt.Stdout, capt.Stderr = &out, &out
	if err := capt.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- capt.Wait() }()
	stop := time.After(10 * time.Second)
loop:
	for {
		s.HostA.Run("ping", "-c", "2", "-i", "0.2", "-W", "1", twosite.HostB4.String())
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wgpio capture: %v\n%s", err, out.String())
			}
			break loop
		case <-stop:
			capt.Process.Kill()
			t.Fatalf("wgpio capture did not get 4 frames in 10 s:\n%s", out.String())
		default:
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pkts := readPCAPNG(t, b)
	for i, p := range pkts {
		if p.iface != 1 || p.flags != 2 {
			t.Errorf("packet %d: interface %d, flags %#x; want 1 (wan), outbound", i, p.iface, p.flags)
		}
	}
	if len(pkts) != 4 {
		t.Errorf("pcapng packets = %d, want 4", len(pkts))
	}
	if tcpdump, err := exec.LookPath("tcpdump"); err == nil {
		td, err := exec.Command(tcpdump, "-n", "-r", file).CombinedOutput()
		if err != nil {
			t.Fatalf("tcpdump -r: %v\n%s", err, td)
		}
		sc := bufio.NewScanner(strings.NewReader(string(td)))
		lines := 0
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "reading from") {
				continue
			}
			lines++
			if !strings.Contains(l, "198.18.1.1.51820 > 198.18.1.2.51820") && !strings.Contains(l, "2001:db8:f::1.51820 > 2001:db8:f::2.51820") {
				t.Errorf("tcpdump line %q: want our WAN address to the stock peer, port 51820", l)
			}
		}
		if lines != 4 {
			t.Errorf("tcpdump read %d packets, want 4:\n%s", lines, td)
		}
	}
}

// TestUpUnprivileged runs the gateway as nobody with only CAP_NET_ADMIN,
// CAP_NET_RAW and CAP_BPF (as dist/wgpio.service does), and RLIMIT_MEMLOCK
// raised before the privileges are dropped (LimitMEMLOCK=infinity in the
// unit): registering the UMEM (XDP_UMEM_REG) charges its pages to
// RLIMIT_MEMLOCK unless the caller has CAP_IPC_LOCK (net/xdp/xdp_umem.c,
// xdp_umem_account_pages), 32 MiB per queue here. The exception TUN needs
// /dev/net/tun open to the user (mode 0666, as most distributions ship it).
// /var/run/wireguard
// (a directory of the test's, bind-mounted) and /var/run/wgpio (a tmpfs)
// are private mounts owned by nobody (systemd's RuntimeDirectory= does
// the same), so the host's are not touched; wg(8)
// and `wgpio stats` run in the gateway's mount namespace. A root-owned
// lock file of the gateway's name that no process holds (a root instance
// killed) is replaced: the start failed on it, naming the directory; and
// so is such an instance's UAPI socket, on which it failed, saying it was
// served.
func TestUpUnprivileged(t *testing.T) {
	testenv.Tool(t, "setpriv", "util-linux")
	testenv.Tool(t, "unshare", "util-linux")
	testenv.Tool(t, "nsenter", "util-linux")
	s := newSite(t, nil)
	script := `set -e
mount --bind "$4" /var/run/wireguard
mount -t tmpfs -o mode=0755 wgpio-test /var/run/wgpio
chown nobody /var/run/wireguard /var/run/wgpio
chown nobody "$2"
# A lock file of root's, left by a root instance killed before it removed
# it: stale, replaced.
echo "$3 1" > /var/run/wgpio/name-$3.lock
if [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
	echo "test: /dev/net/tun is not world-writable on this host: a private 0666 node in the test's mount namespace" >&2
	mount -t tmpfs -o mode=0755 wgpio-test /dev/net
	mknod -m 0666 /dev/net/tun c 10 200
fi
caps=+net_admin,+net_raw,+bpf
if ! ulimit -l unlimited 2>/dev/null; then
	echo "test: cannot raise RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE here): adding CAP_IPC_LOCK" >&2
	caps=$caps,+ipc_lock
fi
exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=$caps --ambient-caps=$caps "$1" up -c "$2"`
	// nobody must reach the binary and the configuration file.
	for _, d := range []string{filepath.Dir(wgpioBin), s.dir, filepath.Dir(s.dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll("/var/run/wireguard", 0o755)
	os.MkdirAll(runDir, 0o755)
	// The UAPI socket of a root gateway killed with SIGKILL: root's, mode
	// 0755, nothing listening; the start as nobody failed on it for good
	// ("in use").
	wgDir := t.TempDir()
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(wgDir, s.GwName+".sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if err := os.Chmod(filepath.Join(wgDir, s.GwName+".sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := s.GwA.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", wgpioBin, s.conf, s.GwName, wgDir)
	g := start(t, cmd)
	// The gateway's mount namespace: enter it through its pid (ip netns
	// exec, unshare, sh and setpriv all exec, so the pid is wgpio's).
	in := func(name string, args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"-t", fmt.Sprint(cmd.Process.Pid), "-m", "-n", name}, args...)...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if g.exited() {
			t.Fatalf("unprivileged wgpio up exited: %v\n%s", g.err, g.output())
		}
		if _, err := in("test", "-S", filepath.Join(runDir, s.GwName+".stats")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unprivileged wgpio up did not come up in 20 s:\n%s", g.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
		if !strings.Contains(string(st), "Uid:\t65534") {
			t.Errorf("gateway process is not running as nobody:\n%s", st)
		}
	}
	if strings.Contains(g.output(), "adding CAP_IPC_LOCK") {
		t.Logf("RLIMIT_MEMLOCK could not be raised on this host: the gateway ran with CAP_IPC_LOCK as a fourth capability")
	}
	s.pingBoth(t)
	out, err := in("wg", "show", s.GwName)
	if err != nil || !strings.Contains(out, "latest handshake") {
		t.Errorf("wg show %s in the gateway's mount namespace: %v\n%s", s.GwName, err, out)
	}
	out, err = in(wgpioBin, "stats", s.GwName)
	if err != nil || !strings.Contains(out, "queue") {
		t.Errorf("wgpio stats: %v\n%s", err, out)
	}
	// A port below 1024 without CAP_NET_BIND_SERVICE is refused, the old
	// one kept (a reload's ListenPort comes the same way): the gateway
	// moved to it, its kernel sockets failed, and every fragmented
	// datagram to it was lost.
	if out, err := in("wg", "set", s.GwName, "listen-port", "443"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("wg set listen-port 443 without CAP_NET_BIND_SERVICE: %v\n%s; want it refused (permission denied)", err, out)
	}
	if out, err := in("wg", "show", s.GwName, "listen-port"); err != nil || strings.TrimSpace(out) != "51820" {
		t.Errorf("listen port after the refused move: %v %q, want 51820", err, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("unprivileged gateway did not stop on SIGTERM")
	}
	if g.err != nil {
		t.Errorf("unprivileged gateway exit: %v\n%s", g.err, g.output())
	}
	if xdpAttached(t, s.GwA, s.WANA) || xdpAttached(t, s.GwA, s.LANA) {
		t.Errorf("an XDP program is still attached after SIGTERM")
	}
}

// withFwMark gives the site's file FwMark = 0x1234.
func withFwMark(f *config.File) {
	f.Interface.FwMark = 0x1234
	f.Interface.Unused = append(f.Interface.Unused, config.Setting{Key: "FwMark", Value: "0x1234"})
}

// checkFwMark: wg(8) reports the FwMark of the file the gateway started
// from (withFwMark), as it reports a Linux wg0's; before the fix wgpio
// ignored it until a `wg syncconf` of the same file set it.
func checkFwMark(t *testing.T, s *site) {
	t.Helper()
	if got := strings.TrimSpace(wg(t, s.GwA, "show", s.GwName, "fwmark")); got != "0x1234" {
		t.Errorf("wg show %s fwmark = %q, want 0x1234 (the file's FwMark)", s.GwName, got)
	}
}

// TestLogFinalExceptionDrops: the counters logged at exit include the
// packets the exception TUN refused (its interface down), which `wgpio
// stats` shows but no queue's drops hold.
func TestLogFinalExceptionDrops(t *testing.T) {
	for _, tc := range []struct {
		drops uint64
		want  bool
	}{{0, false}, {7, true}} {
		var b strings.Builder
		logFinal(slog.New(slog.NewTextHandler(&b, nil)), GatewayStats{Queues: make([]fastpath.QueueStats, 1), ExceptionDrops: &tc.drops})
		if got := strings.Contains(b.String(), fmt.Sprintf("exception_tun_drops=%d", tc.drops)); got != tc.want {
			t.Errorf("logFinal with ExceptionDrops %d logged it: %v, want %v:\n%s", tc.drops, got, tc.want, b.String())
		}
	}
}

// TestLogFinalCompat: compat mode's counters logged at exit include the
// bind's and tundev's drops by reason and what a port queue and the kernel
// at its socket lost, as wgpio stats shows them (before, only the four
// packet counts); what lost nothing adds nothing.
func TestLogFinalCompat(t *testing.T) {
	var c CompatStats
	c.Bind.Drops[bind.DropNotOurs] = 4
	c.Bind.Fragmented, c.Bind.Fragments = 3, 7
	c.LAN.Drops[tundev.PortDropMalformed] = 50
	c.LANQueues = []dataplane.Stats{{Backend: map[string]uint64{"xsk_rx_dropped": 2952}}}
	c.WANQueues = []dataplane.Stats{{}}
	var b strings.Builder
	logFinalCompat(slog.New(slog.NewTextHandler(&b, nil)), c)
	for _, want := range []string{`bind_drops="not_ours=4"`, "bind_fragmented=3 bind_fragments=7", `lan_drops="malformed=50"`, `lan_port_losses_0="xsk_rx_dropped=2952"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("logFinalCompat logged no %s:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "wan_port_losses") {
		t.Errorf("logFinalCompat logged losses for a WAN queue that lost nothing:\n%s", b.String())
	}
}

// TestLogFinalPortLosses: the counters logged at exit include what a
// queue's ports and the kernel at their sockets lost before the workers
// saw it (a worker starved of its CPU: rx_ring_full), as wgpio stats
// shows it; a port that lost nothing adds nothing.
func TestLogFinalPortLosses(t *testing.T) {
	q := fastpath.QueueStats{}
	q.WAN.Backend = map[string]uint64{"xsk_rx_ring_full": 12, "xsk_rx_dropped": 0}
	q.WAN.Drops[dataplane.DropLinkDown] = 3
	var b strings.Builder
	logFinal(slog.New(slog.NewTextHandler(&b, nil)), GatewayStats{Queues: []fastpath.QueueStats{q}})
	if want := `wan_port_losses="link_down=3 xsk_rx_ring_full=12"`; !strings.Contains(b.String(), want) {
		t.Errorf("logFinal logged no %s:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "lan_port_losses") {
		t.Errorf("logFinal logged losses for a LAN port that lost nothing:\n%s", b.String())
	}
}
