//go:build linux

package fastgw_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

func newSite(t *testing.T, sc twosite.Config) *twosite.Site {
	t.Helper()
	testenv.Short(t, "builds namespaces and runs two gateways")
	tp := testenv.Topology(t, "fg")
	s, err := twosite.Build(tp, sc)
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

// logOnFailure logs g's drops and its control plane's counts at the end
// of a test that failed, before g closes (registered after g's Close).
func logOnFailure(t *testing.T, g *fastgw.Gateway) {
	t.Cleanup(func() {
		if t.Failed() {
			s := g.Device().Stats()
			t.Logf("gateway at the failure: drops %s; control plane: %d initiations and %d responses sent, %d keypairs installed, %d live sessions, drops %v",
				dropsString(g), s.InitiationsSent, s.ResponsesSent, s.KeypairsInstalledTotal, s.LiveSessions, s.Losses())
		}
	})
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
		cfg  twosite.Config
	}{
		{"on-link", twosite.Config{}},
		{"routed", twosite.Config{Routed: true}},
		{"outer-ipv6", twosite.Config{Outer6: true}},
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
			tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 8<<20)
			tcpTransfer(t, s.HostB, s.HostA, twosite.HostA4, 8<<20)
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

// TestFragmentedOuterPackets: the stock peer's path to the wgpio gateway
// has an MTU of 1300, below its full-size WireGuard datagrams (1420 + 60
// bytes of outer IPv4, UDP and WireGuard headers), so its kernel sends them
// as IP fragments. The XDP program leaves fragments to gwA's kernel, which
// reassembles them for the gateway's socket on the WireGuard port
// (listenKernel): full-size pings and a TCP transfer arrive, the datagrams
// counted in FromKernel, none answered "port unreachable".
func TestFragmentedOuterPackets(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	for _, sc := range []struct {
		name string
		cfg  twosite.Config
		gwA  string // gwA's WAN address, as gwB reaches it
	}{
		{"ipv4", twosite.Config{}, "198.18.1.1"},
		{"ipv6", twosite.Config{Outer6: true}, "2001:db8:f::1"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			s := newSite(t, sc.cfg)
			ping(t, s.HostB, "198.19.1.10", 0) // handshake first, unfragmented
			mtu := "1300"
			if out, err := s.GwB.Run("ip", "route", "replace", sc.gwA, "dev", s.WANB, "mtu", "lock", mtu); err != nil {
				t.Fatalf("ip route replace %s mtu %s: %v\n%s", sc.gwA, mtu, err, out)
			}
			fromKernel := func() (n uint64) {
				for _, q := range s.Gateway.Engine().Stats() {
					n += q.FromKernel
				}
				return n
			}
			before := fromKernel()
			ping(t, s.HostB, "198.19.1.10", 1392) // full-size inner packets
			tcpTransfer(t, s.HostB, s.HostA, twosite.HostA4, 4<<20)
			if got := fromKernel() - before; got == 0 {
				t.Errorf("no datagram came through the kernel; drops %s", dropsString(s.Gateway))
			}
			t.Logf("datagrams through the kernel: %d; wgpio drops: %s", fromKernel()-before, dropsString(s.Gateway))
		})
	}
}

// TestPrefixMapFull: a configuration change that meets the LAN prefix
// map's capacity is applied to the control plane and the engine (the
// existing tunnel keeps working, later changes keep applying) and reported
// to the client: wg set fails with "No space left on device".
func TestPrefixMapFull(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	testenv.Tool(t, "wg", "wireguard-tools")
	s := newSite(t, twosite.Config{NoFastPath: true})
	fc := s.FastConfig
	fc.LANPrefixCapacity = 8
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, "198.19.2.10", 0)
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("198.19.%d.1/32", 50+i))
	}
	priv, _ := noise.NewPrivateKey()
	key := priv.PublicKey().Base64()
	out, err := exec.Command("wg", "set", s.GwName, "peer", key, "allowed-ips", strings.Join(many, ",")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "No space left on device") {
		t.Errorf("wg set with more prefixes than the map holds: %v, %q; want it to fail with ENOSPC", err, out)
	}
	if dump := wgShow(t, s.GwName); !strings.Contains(dump, "198.19.69.1/32") {
		t.Errorf("the new peer's allowed IPs are not in the configuration:\n%s", dump)
	}
	// The tunnel still works, and later changes still reach the engine
	// while the map is full: without the stock peer's host network in its
	// allowed IPs, hostB's packets are dropped (allowed_ips); with it
	// again, they pass.
	ping(t, s.HostA, "198.19.2.10", 0)
	stock := fc.Peers[0]
	setAllowed := func(skip string) {
		t.Helper()
		var allowed []string
		for _, p := range stock.AllowedIPs {
			if p.String() != skip {
				allowed = append(allowed, p.String())
			}
		}
		exec.Command("wg", "set", s.GwName, "peer", stock.PublicKey.Base64(), "allowed-ips", strings.Join(allowed, ",")).Run()
	}
	before := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropAllowedIPs]
	setAllowed("198.19.2.0/24")
	s.HostB.Run("ping", "-c", "2", "-i", "0.2", "-W", "1", "198.19.1.10")
	// ping gives up after a second, which does not wait for the worker.
	if !testenv.PollUntil(20*time.Second, func() bool {
		return fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropAllowedIPs] > before
	}) {
		t.Errorf("hostB's packets were not dropped for allowed IPs after its network left the peer's: the engine missed the change")
	}
	setAllowed("")
	ping(t, s.HostB, "198.19.1.10", 0)
	// A change that frees the map applies cleanly.
	if out, err := exec.Command("wg", "set", s.GwName, "peer", key, "remove").CombinedOutput(); err != nil {
		t.Errorf("wg set remove after the map overflowed: %v\n%s", err, out)
	}
	ping(t, s.HostB, "198.19.1.10", 0)
}

// TestOwnTunnelAddressTCP: an SSH-like TCP session from a host behind the
// stock peer to the wgpio gateway's own tunnel address, which the gateway
// hands to the host kernel through its exception TUN.
func TestOwnTunnelAddressTCP(t *testing.T) {
	s := newSite(t, twosite.Config{})
	tcpTransfer(t, s.HostB, s.GwA, twosite.TunnelA, 1<<20)
	tcpTransfer(t, s.GwA, s.HostB, twosite.HostB4, 1<<20)
	var exc uint64
	for _, q := range s.Gateway.Engine().Stats() {
		exc += q.Exception
	}
	if exc == 0 {
		t.Error("no packet went through the exception interface")
	}
}

// TestMillionDatagrams sends 10^6 UDP datagrams from hostA to hostB through
// wgpio and stock wireguard-go and checks that every one arrived once with
// its payload intact (the receiving kernel verified every UDP checksum, and
// the test compares the payload). The sender paces itself by the receiver's
// count: at most millionWindow datagrams are in flight, fewer than any
// queue on the path holds (wgpio's rings, the packets it holds for a
// handshake, wireguard-go's queues, the receiver's socket), so a datagram
// missing is lost by the data path, not by the machine's load; a busy
// machine only makes the test slower.
func TestMillionDatagrams(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	var rc, sc *net.UDPConn
	if err := s.HostB.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if raw, err := rc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			// Room for far more than the window (SO_RCVBUFFORCE: past
			// net.core.rmem_max, we are root).
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		})
	}
	if err := s.HostA.Do(func() (err error) {
		sc, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	seen := make([]bool, n)
	var arrived atomic.Int64      // datagrams read, intact or not
	ack := make(chan struct{}, 1) // poked after each read
	done := make(chan int, 1)     // the intact count, once the receiver stops
	go func() {
		buf := make([]byte, 2048)
		cnt := 0
		for arrived.Load() < int64(n) {
			// The window is always in flight, so a quiet socket means
			// datagrams were lost (the bound only ends the test).
			rc.SetReadDeadline(time.Now().Add(millionStall))
			k, err := rc.Read(buf)
			if err != nil {
				break
			}
			if k == 64 {
				seq := int(binary.BigEndian.Uint32(buf))
				if seq < n && !seen[seq] && bytes.Equal(buf[4:64], payloadFor(seq)) {
					seen[seq] = true
					cnt++
				}
			}
			arrived.Add(1)
			select {
			case ack <- struct{}{}:
			default:
			}
		}
		done <- cnt
	}()
	msg := make([]byte, 64)
	stopped := -1
send:
	for i := 0; i < n; i++ {
		for int64(i)-arrived.Load() >= millionWindow {
			select {
			case <-ack:
			case c := <-done:
				stopped = c
				break send
			}
		}
		binary.BigEndian.PutUint32(msg, uint32(i))
		copy(msg[4:], payloadFor(i))
		if _, err := sc.Write(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	c := stopped
	if c < 0 {
		c = <-done
	}
	if c != n {
		var diag strings.Builder
		for _, ns := range []*topo.NS{s.GwB, s.HostB} {
			out, _ := ns.Run("nstat", "-asz", "UdpRcvbufErrors", "UdpInErrors", "IpInDiscards", "IpOutDiscards")
			fmt.Fprintf(&diag, "%s:\n%s", ns.Name, out)
		}
		wan, lan := s.Gateway.Ports()
		t.Fatalf("received %d of %d datagrams intact (%d read); wgpio drops: %s\nLAN %+v\nWAN %+v\n%s", c, n, arrived.Load(), dropsString(s.Gateway), lan.Stats(), wan.Stats(), diag.String())
	}
}

// millionWindow is how many datagrams TestMillionDatagrams keeps in flight:
// what wgpio holds for a peer while a handshake is under way, and far below
// every ring and queue on the path (AF_XDP rings of 2048, wireguard-go's
// queues of 1024, the kernel's backlog of 1000 per CPU, the receiver's
// socket buffer).
const millionWindow = fastpath.MaxHeldPerPeer

// millionStall is how long the receiver waits for the next datagram before
// it counts the rest as lost: with the window in flight, only a loss (or a
// machine stopped for that long) leaves it waiting.
const millionStall = 60 * time.Second

func payloadFor(seq int) []byte {
	p := make([]byte, 60)
	for i := range p {
		p[i] = byte(seq*7 + i)
	}
	return p
}

// TestDefaultRouteKeepsHostTraffic: with AllowedIPs = 0.0.0.0/0, ::/0 the
// LAN-side XDP program still leaves the gateway's own addresses, broadcast
// and multicast (ARP, NDP) to the kernel, so hosts can still reach the
// gateway itself, while traffic to the far site goes through the tunnel.
func TestDefaultRouteKeepsHostTraffic(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{AllowedA: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	ping(t, s.HostA, twosite.LANA4.String(), 0)  // the gateway's own LAN address (ARP + ICMP to the kernel)
	ping(t, s.HostA, "2001:db8:1::1", 0)         // NDP + ICMPv6 to the kernel
	ping(t, s.HostA, twosite.HostB4.String(), 0) // through the tunnel
	ping(t, s.HostA, "2001:db8:2::10", 0)
	wan, lan := s.Gateway.Ports()
	_ = wan
	st := lan.Stats()
	if st.Backend["xdp_passed"] == 0 && st.Backend["xdp_pass"] == 0 {
		t.Logf("LAN XDP counters: %v", st.Backend)
	}
}

// TestWgpioToWgpioSourcePorts: two wgpio gateways with 2 queues and 16
// outer source ports, through a router (veth has no RSS: a frame's RX queue
// is the sender's TX queue). One inner TCP flow keeps one outer source port
// on the wire (captured at the router), arrives without reordering, and
// neither gateway's endpoint for the other moves during the flow: a
// source that differs in its port only does not roam toward a peer of
// several source ports (fastpath: sawSource), so the flow keeps one outer
// destination port, hence one receive queue at B.
//
// Reordering is judged by the inner IPv4 identification field, which Linux
// increments per transmitted segment of a connected TCP socket: the order
// in which host B receives the identifications must be the order in which
// host A sent them. A segment lost on a loaded machine (and retransmitted
// under a new identification) is not reordering and does not fail the test.
func TestWgpioToWgpioSourcePorts(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	// Both gateways run in this process, 2 queues each: 4 workers. With
	// fewer Ps than that the workers would be shared (fastpath/threads.go:
	// unpinned goroutines), and on veth, whose transmit runs on the sending
	// CPU, a worker that migrates can deliver a flow out of order (see
	// fastpath.Config.CPUs). A gateway in production runs in its own
	// process with a CPU per worker: give the test's workers a P each, so
	// that they own their pinned threads as such a gateway's do. Registered
	// first, the restore runs after the site's own clean-up.
	prev := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	s := newSite(t, twosite.Config{PeerFastPath: true, Routed: true, Queues: 2, SourcePorts: 16, CPUs: []int{0, 1}})
	// On veth the queue a frame arrives on is the one its sender's stack
	// picked by the socket's transmit hash, which TCP draws anew after a
	// retransmission timeout (net.core.txrehash): a worker of A starved
	// of its CPU for 200 ms (seen at load 6-9) makes the sender time out,
	// and the retransmission, on the other queue, overtakes the segments
	// waiting on the first. A NIC's RSS hashes the headers and keeps a
	// flow on its queue; so does host A here without rehashing.
	if err := s.HostA.Do(func() error {
		return os.WriteFile("/proc/sys/net/core/txrehash", []byte("0"), 0)
	}); err != nil {
		t.Fatalf("host A: net.core.txrehash=0: %v", err)
	}
	if out, err := s.HostA.Run("cat", "/proc/sys/net/core/txrehash"); err != nil || strings.TrimSpace(out) != "0" {
		t.Fatalf("host A's net.core.txrehash = %q (%v), want 0", out, err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	// A first transfer learns the path MTU (the LAN MTU is 1500, the
	// tunnel's 1420: the first full segments are dropped with an ICMP
	// error). It runs before the captures start, so that the captures hold
	// one TCP flow only.
	tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 256<<10)
	dir := t.TempDir()
	outer := testenv.StartCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, "198.18.2.254"), dir+"/wan.pcap",
		"udp and src host 198.18.1.1")
	sent := testenv.StartCapture(t, tcpdump, s.HostA, ifaceWith(t, s.HostA, twosite.HostA4.String()), dir+"/sent.pcap",
		"tcp and dst host "+twosite.HostB4.String()+" and greater 500")
	recv := testenv.StartCapture(t, tcpdump, s.HostB, ifaceWith(t, s.HostB, twosite.HostB4.String()), dir+"/recv.pcap",
		"tcp and dst host "+twosite.HostB4.String()+" and greater 500")
	epA0, epB0 := s.Gateway.Device().Peers()[0].Endpoint, s.PeerGateway.Device().Peers()[0].Endpoint
	tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 4<<20)
	time.Sleep(200 * time.Millisecond)
	ports := map[string]int{}
	// dsts counts the datagrams per outer destination port in the order
	// the ports first appear: the port is A's endpoint for B. Had it
	// followed B's replies to another of B's source ports, the flow
	// would have moved to another of B's queues mid-flow, and been
	// reordered (about 3% of runs did, before sawSource kept it).
	var dsts []string
	dstCount := map[string]int{}
	for _, line := range outer.Lines(t) {
		// "IP 198.18.1.1.51827 > 198.18.2.2.51820: UDP, length 148"
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "IP" || !strings.HasPrefix(f[2], "198.18.1.1.") {
			continue
		}
		ports[f[2][len("198.18.1.1."):]]++
		d := strings.TrimSuffix(f[4][strings.LastIndexByte(f[4], '.')+1:], ":")
		if dstCount[d] == 0 {
			dsts = append(dsts, d)
		}
		dstCount[d]++
	}
	// Keepalives and handshakes use the listen port; the TCP flow's data
	// one hashed port (the ACKs go the other way).
	var data []string
	for p, n := range ports {
		if n > 100 {
			data = append(data, p)
		}
	}
	if len(data) != 1 {
		t.Errorf("outer source ports carrying the TCP flow A→B: %v (all ports seen %v), want exactly one", data, ports)
	}
	ep := s.PeerGateway.Device().Peers()[0].Endpoint
	t.Logf("B's endpoint for A: %v; ports seen %v", ep, ports)
	var dstLog strings.Builder
	for _, d := range dsts {
		fmt.Fprintf(&dstLog, " %s×%d", d, dstCount[d])
	}
	t.Logf("A's endpoint for B: %v; A→B destination ports in wire order:%s", s.Gateway.Device().Peers()[0].Endpoint, dstLog.String())
	if epA := s.Gateway.Device().Peers()[0].Endpoint; epA != epA0 {
		t.Errorf("A's endpoint for B moved from %v to %v during the transfer, want it kept", epA0, epA)
	}
	if ep != epB0 {
		t.Errorf("B's endpoint for A moved from %v to %v during the transfer, want it kept", epB0, ep)
	}
	var dataDsts []string
	for _, d := range dsts {
		if dstCount[d] > 100 {
			dataDsts = append(dataDsts, d)
		}
	}
	if len(dataDsts) != 1 {
		t.Errorf("outer destination ports carrying the TCP flow A→B:%s, want exactly one", dstLog.String())
	}
	sentIDs, recvIDs := ipIDs(t, sent), ipIDs(t, recv)
	if len(sentIDs) < 1000 || len(recvIDs) < 1000 {
		t.Fatalf("captured %d segments sent and %d received, want over 1000 each", len(sentIDs), len(recvIDs))
	}
	pos := make(map[uint16]int, len(sentIDs))
	for i, id := range sentIDs {
		pos[id] = i
	}
	if len(pos) < len(sentIDs)*9/10 {
		t.Fatalf("host A's segments carry %d distinct IPv4 identifications for %d segments: cannot judge the order", len(pos), len(sentIDs))
	}
	last, inversions, unknown := -1, 0, 0
	for _, id := range recvIDs {
		i, ok := pos[id]
		switch {
		case !ok:
			unknown++ // the sender's capture missed it
		case i < last:
			inversions++
			if inversions <= 5 {
				t.Logf("id %d (sent #%d) arrived after sent #%d", id, i, last)
			}
		default:
			last = i
		}
	}
	t.Logf("segments: %d sent, %d received, %d not in the sender's capture; drops: A %s B %s",
		len(sentIDs), len(recvIDs), unknown, dropsString(s.Gateway), dropsString(s.PeerGateway))
	for _, g := range []struct {
		name string
		gw   *fastgw.Gateway
	}{{"A", s.Gateway}, {"B", s.PeerGateway}} {
		for i, q := range g.gw.Engine().Stats() {
			t.Logf("%s queue %d: encrypted %d decrypted %d exception %d control sent %d held %d from kernel %d",
				g.name, i, q.Encrypted, q.Decrypted, q.Exception, q.ControlSent, q.Held, q.FromKernel)
		}
		_, lan := g.gw.Ports()
		t.Logf("%s LAN XDP: %v", g.name, lan.Stats().Backend)
	}
	if inversions > 0 {
		t.Errorf("host B received %d of %d segments after a segment sent later (reordering)", inversions, len(recvIDs))
	}
}

// ipIDs returns the IPv4 identification of each packet c captured, in
// order (it stops c).
func ipIDs(t *testing.T, c *testenv.Capture) []uint16 {
	t.Helper()
	var ids []uint16
	for _, line := range c.Lines(t, "-v") {
		// "... IP (tos 0x0, ttl 64, id 4242, offset 0, flags [DF], ..."
		i := strings.Index(line, " id ")
		if i < 0 {
			continue
		}
		var id uint16
		if _, err := fmt.Sscanf(line[i+len(" id "):], "%d,", &id); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// ifaceWith returns the name of ns's interface that has addr.
func ifaceWith(t *testing.T, ns *topo.NS, addr string) string {
	t.Helper()
	out, err := ns.Run("ip", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[3], addr+"/") {
			return strings.TrimSuffix(f[1], ":")
		}
	}
	t.Fatalf("%s has no address %s:\n%s", ns.Name, addr, out)
	return ""
}
