//go:build linux

package fastgw_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// Behaving like the Linux router the gateway replaces (RFC 1812, RFC 8200):
// against stock wireguard-go in the two-site topology.

// runOK runs cmd in ns and returns its output, failing the test on error.
func runOK(t *testing.T, ns *topo.NS, name string, args ...string) string {
	t.Helper()
	out, err := ns.Run(name, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// TestTTLTimeExceeded: `ping -t 1` through the gateway gets time exceeded
// from its LAN address; a packet that reaches it from the tunnel with TTL
// 1 gets it from the gateway's tunnel address (IPv4; its LAN address for
// IPv6, where it has no tunnel address); traceroute lists the gateway both
// ways, IPv4 and IPv6.
func TestTTLTimeExceeded(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	tr := testenv.Tool(t, "traceroute", "traceroute")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostA, twosite.HostB6.String(), 0)
	for _, c := range []struct {
		from *topo.NS
		dst  string
		ttl  string
		want string
	}{
		{s.HostA, twosite.HostB4.String(), "1", "From 198.19.1.1 icmp_seq=1 Time to live exceeded"},
		{s.HostA, twosite.HostB6.String(), "1", "From 2001:db8:1::1 icmp_seq=1 Time exceeded: Hop limit"},
		// hostB's packet leaves gwB with TTL 1: gwA is the hop where it expires.
		{s.HostB, twosite.HostA4.String(), "2", "From 198.19.100.1 icmp_seq=1 Time to live exceeded"},
		{s.HostB, twosite.HostA6.String(), "2", "From 2001:db8:1::1 icmp_seq=1 Time exceeded: Hop limit"},
	} {
		out, _ := c.from.Run("ping", "-c", "1", "-W", "2", "-t", c.ttl, c.dst)
		if !strings.Contains(out, c.want) {
			t.Errorf("ping -t %s %s from %s: want %q, got:\n%s", c.ttl, c.dst, c.from.Name, c.want, out)
		}
	}
	for _, c := range []struct {
		from *topo.NS
		dst  string
		hops []string // hop 1, 2, 3
	}{
		{s.HostA, twosite.HostB4.String(), []string{"198.19.1.1", "198.19.100.2", twosite.HostB4.String()}},
		{s.HostA, twosite.HostB6.String(), []string{"2001:db8:1::1", "", twosite.HostB6.String()}},
		{s.HostB, twosite.HostA4.String(), []string{"198.19.2.1", "198.19.100.1", twosite.HostA4.String()}},
		{s.HostB, twosite.HostA6.String(), []string{"2001:db8:2::1", "2001:db8:1::1", twosite.HostA6.String()}},
	} {
		args := []string{"-n", "-q", "1", "-w", "2", "-m", "5"}
		if strings.Contains(c.dst, ":") {
			args = append(args, "-6")
		}
		out := runOK(t, c.from, tr, append(args, c.dst)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for i, want := range c.hops {
			if want == "" {
				continue
			}
			if len(lines) <= i+1 || !strings.Contains(lines[i+1], " "+want+" ") {
				t.Errorf("traceroute %s from %s: hop %d is not %s:\n%s", c.dst, c.from.Name, i+1, want, out)
				break
			}
		}
	}
	st := s.Gateway.Engine().Stats()
	if fastpath.TotalDrops(st)[fastpath.DropTTLExceeded] == 0 || st[0].ICMPSent == 0 {
		t.Errorf("stats: ttl_exceeded %d, icmp sent %d; want both > 0", fastpath.TotalDrops(st)[fastpath.DropTTLExceeded], st[0].ICMPSent)
	}
}

// TestFragmentation: IPv4 without DF over the tunnel MTU is fragmented, as
// Linux does before wg0: pings of 1472 and 4000 bytes cross both ways; 1,000
// UDP datagrams of 3,000 bytes without DF arrive complete and intact (hostA
// sends them as 1500-byte fragments, which the gateway cuts again); DF
// variants still get "fragmentation needed (mtu 1420)".
func TestFragmentation(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	for _, size := range []string{"1472", "4000"} {
		for _, c := range []struct {
			from *topo.NS
			dst  string
		}{{s.HostA, twosite.HostB4.String()}, {s.HostB, twosite.HostA4.String()}} {
			if out, err := c.from.Run("ping", "-c", "2", "-W", "2", "-M", "dont", "-s", size, c.dst); err != nil {
				t.Errorf("ping -M dont -s %s %s: %v\n%s", size, c.dst, err, out)
			}
		}
	}
	st := s.Gateway.Engine().Stats()[0]
	if st.Fragmented == 0 {
		t.Errorf("nothing fragmented: %+v", st)
	}

	var rc, sc *net.UDPConn
	if err := s.HostB.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9200})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if raw, err := rc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			// Past net.core.rmem_max: we are root (SO_RCVBUFFORCE).
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		})
	}
	if err := s.HostA.Do(func() (err error) {
		sc, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9200})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if raw, err := sc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT)
		})
	}
	const n, size = 1000, 3000
	dropsBefore, _ := abPathDrops(t, s)
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 4096)
		seen := make(map[uint32]bool)
		for len(seen) < n {
			rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			k, err := rc.Read(buf)
			if err != nil {
				break
			}
			seq := binary.BigEndian.Uint32(buf)
			if k == size && bytes.Equal(buf[4:k], fragPayload(seq, size)[4:]) {
				seen[seq] = true
			}
		}
		got <- len(seen)
	}()
	for i := range n {
		if _, err := sc.Write(fragPayload(uint32(i), size)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i%10 == 9 {
			time.Sleep(2 * time.Millisecond) // the stock peer decrypts on 2 busy cores
		}
	}
	// The datagrams are sent open loop (paced for the stock peer): on a
	// loaded machine the kernel may drop some fragments on the way (a
	// veth's ring or backlog, an AF_XDP ring, the stock peer's socket,
	// host B's reassembly or socket), and counts each. A datagram missing
	// needs at least one such count, or the gateway lost it.
	c := <-got
	dropsAfter, detail := abPathDrops(t, s)
	if lost := uint64(n - c); lost > dropsAfter-dropsBefore {
		var diag strings.Builder
		for _, ns := range []*topo.NS{s.HostA, s.GwB, s.HostB} {
			out, _ := ns.Run("nstat", "-asz", "IpReasmFails", "IpReasmTimeout", "IpReasmOKs", "IpFragCreates", "UdpRcvbufErrors", "UdpInErrors", "IpInDiscards", "IpOutDiscards", "IpFragFails")
			fmt.Fprintf(&diag, "%s:\n%s", ns.Name, out)
		}
		wan, lan := s.Gateway.Ports()
		t.Errorf("received %d of %d 3,000-byte datagrams intact, %d counted dropped by the kernel (%s); drops %s\nLAN %+v\nWAN %+v\n%s",
			c, n, dropsAfter-dropsBefore, detail, dropsString(s.Gateway), lan.Stats(), wan.Stats(), diag.String())
	} else if lost > 0 {
		t.Logf("%d of %d datagrams lost where the kernel counted drops (machine load): %s", lost, n, detail)
	}

	out, _ := s.HostA.Run("ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", twosite.HostB4.String())
	if !strings.Contains(out, "mtu = 1420") {
		t.Errorf("ping -M do -s 1472: want frag needed (mtu = 1420), got:\n%s", out)
	}
}

// TestLANMTULive: the LAN interface's MTU lowered while the gateway runs
// (`ip link set LAN mtu 1300`) applies to the packets decrypted after it,
// as a Linux router checks each forwarded packet against the outgoing
// device's MTU: a 1400-byte ping with DF from hostB gets "fragmentation
// needed (mtu = 1300)" back through the tunnel (lan_too_big). Before the
// gateway followed the LAN MTU, the MTU read at start held: the packet
// left whole, and a LAN host behind a link of that MTU never got it, with
// no count at the gateway and no ICMP for its sender.
func TestLANMTULive(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	lowerLANMTU(t, s)
}

// lowerLANMTU lowers gwA's LAN MTU to 1300 and checks that a DF packet
// from hostB over it is answered with fragmentation needed (mtu = 1300)
// and counted lan_too_big.
func lowerLANMTU(t *testing.T, s *twosite.Site) {
	t.Helper()
	runOK(t, s.GwA, "ip", "link", "set", "dev", s.LANA, "mtu", "1300")
	var out string
	waitFor(t, "fragmentation needed with the new LAN MTU", func() bool {
		out, _ = s.HostB.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1372", twosite.HostA4.String())
		return strings.Contains(out, "mtu = 1300")
	})
	// A worker counts a burst's drops after answering them.
	testenv.PollUntil(5*time.Second, func() bool { return fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropLANTooBig] > 0 })
	if d := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropLANTooBig]; d == 0 {
		t.Errorf("lan_too_big = 0 after a DF packet over the LAN MTU; drops %s; ping:\n%s", dropsString(s.Gateway), out)
	}
}

// TestLANMTUResubscribed: the MTU watchers' link subscriptions end at
// start (as one does when its socket overflows in a burst of link
// events); they subscribe again, and a LAN MTU lowered after that is
// still followed.
func TestLANMTUResubscribed(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	t.Cleanup(fastgw.EndFirstLinkSubscriptions(2)) // after the gateway's Close
	s := newSite(t, twosite.Config{})
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	// Before or after the watcher subscribed again: it reads the link
	// when it does.
	lowerLANMTU(t, s)
}

// TestPingGatewayLANAddress: hostB, at the far site, pings gwA's LAN
// address through the tunnel and gets the answer, as from a Linux router
// whose wg0 delivers locally what comes for any of its addresses. Before,
// the packet was forwarded toward the LAN, where gwA's kernel could not
// resolve its own address: no answer, counted as no_neighbour.
func TestPingGatewayLANAddress(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	ping(t, s.HostB, twosite.LANA4.String(), 0)
	if d := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropNoNeighbour]; d != 0 {
		t.Errorf("no_neighbour = %d; drops %s", d, dropsString(s.Gateway))
	}
}

func fragPayload(seq uint32, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint32(p, seq)
	for i := 4; i < size; i++ {
		p[i] = byte(int(seq)*7 + i)
	}
	return p
}

// TestICMPRateLimit: a flood of TTL-1 packets gets time exceeded at the
// configured rate (here 200/s, burst 20, no per-destination limit), the rest
// counted as suppressed; with the default per-destination limit one host
// gets 6 and then 1 a second; a flood of DF packets over the MTU is answered
// in full.
func TestICMPRateLimit(t *testing.T) {
	s := newSite(t, twosite.Config{NoFastPath: true})
	fc := s.FastConfig
	fc.ICMPRate, fc.ICMPBurst, fc.ICMPDestInterval = 200, 20, -1
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	// hostA listens for the ICMP errors and floods with TTL 1 / DF.
	var ic *net.IPConn
	if err := s.HostA.Do(func() (err error) {
		ic, err = net.ListenIP("ip4:icmp", &net.IPAddr{IP: twosite.HostA4.AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if raw, err := ic.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		})
	}
	// Unconnected: the ICMP errors do not come back as socket errors.
	var uc *net.UDPConn
	dst := &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9300}
	if err := s.HostA.Do(func() (err error) {
		uc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostA4.AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	setsock := func(level, opt, v int) {
		raw, _ := uc.SyscallConn()
		raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), level, opt, v) })
	}
	count := func(typ ipv4.ICMPType, wait time.Duration) int {
		n := 0
		buf := make([]byte, 2048)
		for {
			ic.SetReadDeadline(time.Now().Add(wait))
			k, _, err := ic.ReadFrom(buf)
			if err != nil {
				return n
			}
			if m, err := icmp.ParseMessage(1, buf[:k]); err == nil && m.Type == typ {
				n++
			}
		}
	}
	before := s.Gateway.Engine().Stats()[0]
	lostBefore, _ := lanPathLosses(t, s)
	setsock(unix.IPPROTO_IP, unix.IP_TTL, 1)
	const flood = 2000
	start := time.Now()
	for i := range flood {
		uc.WriteToUDP([]byte("ttl one"), dst)
		if i%100 == 99 {
			time.Sleep(time.Millisecond)
		}
	}
	flooded := time.Since(start)
	got := count(ipv4.ICMPTypeTimeExceeded, 2*time.Second)
	after := s.Gateway.Engine().Stats()[0]
	elapsed := time.Since(start) // every message was allowed within it
	sent, supp := after.ICMPSent-before.ICMPSent, after.ICMPSuppressed-before.ICMPSuppressed
	dropped := fastpath.TotalDrops(s.Gateway.Engine().Stats())[fastpath.DropTTLExceeded]
	// The flood comes in bursts of 100: on a loaded machine the kernel may
	// drop some before the gateway sees them (the veth's ring in front of
	// the XDP program, the AF_XDP RX ring), and counts them there. Every
	// packet the gateway received is answered or suppressed; none of the
	// rest may be missing without a kernel count.
	lostAfter, lostDetail := lanPathLosses(t, s)
	if lost := lostAfter - lostBefore; dropped > flood || flood-dropped > lost || sent+supp != dropped {
		t.Errorf("TTL-1 flood of %d: %d dropped ttl_exceeded, %d answered + %d suppressed, %d lost before the gateway (%s)", flood, dropped, sent, supp, lost, lostDetail)
	} else if dropped < flood {
		t.Logf("TTL-1 flood: %d of %d lost before the gateway, counted by the kernel (%s)", flood-dropped, flood, lostDetail)
	}
	// At most the burst plus the rate over the time since the flood
	// began; at least the burst.
	if max := 20 + int(200*elapsed.Seconds()) + 1; int(sent) > max || sent < 20 {
		t.Errorf("%d time exceeded sent in %v, want between the burst (20) and %d", sent, elapsed, max)
	}
	if got != int(sent) {
		t.Errorf("hostA received %d time exceeded, the gateway sent %d", got, sent)
	}
	t.Logf("TTL-1 flood: %d packets in %v, %d time exceeded, %d suppressed", flood, flooded, sent, supp)

	// DF over the MTU: every one answered (IP_PMTUDISC_PROBE sets DF but
	// ignores the path MTU hostA learns).
	setsock(unix.IPPROTO_IP, unix.IP_TTL, 64)
	setsock(unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
	before = s.Gateway.Engine().Stats()[0]
	lostBefore, _ = lanPathLosses(t, s)
	const big = 300
	for i := range big {
		if _, err := uc.WriteToUDP(make([]byte, 1472), dst); err != nil {
			t.Fatalf("DF send %d: %v", i, err)
		}
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
	got = count(ipv4.ICMPTypeDestinationUnreachable, 2*time.Second)
	after = s.Gateway.Engine().Stats()[0]
	// Every one the gateway received is answered (as above, the kernel
	// counts what it dropped before the gateway).
	lostAfter, lostDetail = lanPathLosses(t, s)
	answered := after.ICMPSent - before.ICMPSent
	if lost := lostAfter - lostBefore; got != int(answered) || after.ICMPSuppressed != before.ICMPSuppressed || answered > big || big-answered > lost {
		t.Errorf("DF flood of %d over the MTU: %d frag needed sent, %d received, %d suppressed, %d lost before the gateway (%s); want all answered; drops %s",
			big, answered, got, after.ICMPSuppressed-before.ICMPSuppressed, lost, lostDetail, dropsString(s.Gateway))
	}
}

// abPathDrops sums what the kernel dropped and counted on the way from host
// A to host B's sockets through gwA and the stock peer: every link of the
// site's namespaces, gwA's AF_XDP RX rings, the stock peer's and host B's
// UDP socket overflows and host B's failed reassemblies. Compare two
// readings.
func abPathDrops(t *testing.T, s *twosite.Site) (uint64, string) {
	t.Helper()
	// s.Router is nil without a router (the gateways share a link).
	total, links, err := topo.LinkDrops(s.HostA, s.GwA, s.Router, s.GwB, s.HostB)
	if err != nil {
		t.Fatal(err)
	}
	var detail strings.Builder
	detail.WriteString(links)
	wan, lan := s.Gateway.Ports()
	for _, p := range []struct {
		name string
		st   map[string]uint64
	}{{"LAN", lan.Stats().Backend}, {"WAN", wan.Stats().Backend}} {
		total += p.st["xsk_rx_ring_full"] + p.st["xsk_rx_dropped"]
		fmt.Fprintf(&detail, " gwA %s xsk_rx_ring_full=%d xsk_rx_dropped=%d", p.name, p.st["xsk_rx_ring_full"], p.st["xsk_rx_dropped"])
	}
	for _, c := range []struct {
		ns    *topo.NS
		names []string
	}{{s.GwB, []string{"UdpRcvbufErrors"}}, {s.HostB, []string{"UdpRcvbufErrors", "IpReasmFails"}}} {
		out, err := c.ns.Run("nstat", append([]string{"-asz"}, c.names...)...)
		if err != nil {
			t.Fatalf("nstat in %s: %v: %s", c.ns.Name, err, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && slices.Contains(c.names, f[0]) {
				v, err := strconv.ParseUint(f[1], 10, 64)
				if err != nil {
					t.Fatalf("nstat in %s: %q: %v", c.ns.Name, line, err)
				}
				total += v
				if v > 0 {
					fmt.Fprintf(&detail, " %s %s=%d", c.ns.Name, f[0], v)
				}
			}
		}
	}
	return total, detail.String()
}

// lanPathLosses sums what the kernel dropped between host A and gateway A's
// workers: the links of both namespaces (a veth whose peer's ring in front
// of the XDP program had no room counts it) and the LAN port's AF_XDP RX
// ring (full, or no fill buffer). Compare two readings.
func lanPathLosses(t *testing.T, s *twosite.Site) (uint64, string) {
	t.Helper()
	total, links, err := topo.LinkDrops(s.HostA, s.GwA)
	if err != nil {
		t.Fatal(err)
	}
	var detail strings.Builder
	detail.WriteString(links)
	_, lan := s.Gateway.Ports()
	st := lan.Stats().Backend
	total += st["xsk_rx_ring_full"] + st["xsk_rx_dropped"]
	fmt.Fprintf(&detail, " LAN xsk_rx_ring_full=%d xsk_rx_dropped=%d", st["xsk_rx_ring_full"], st["xsk_rx_dropped"])
	return total, detail.String()
}

// TestECNAcrossTunnel: an ECT(0) packet from hostA arrives at hostB still
// ECT(0) (stock wireguard-go peer). Between two wgpio gateways, whose outer
// headers carry the inner ECN field, a router that marks the outer header
// CE on its link toward gwB makes hostB's packet CE (RFC 6040),
// and leaves a Not-ECT packet alone (topo.MarkCE: a TCX program).
func TestECNAcrossTunnel(t *testing.T) {
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	if got := udpTOS(t, s, 0x02); got&3 != 2 {
		t.Errorf("ECT(0) across the stock peer: TOS at hostB %#x", got)
	}

	testenv.Short(t, "builds namespaces and runs two gateways")
	tp := testenv.Topology(t, "fe")
	w, err := twosite.Build(tp, twosite.Config{PeerFastPath: true, Routed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	ping(t, w.HostA, twosite.HostB4.String(), 0)
	if got := udpTOS(t, w, 0x02); got&3 != 2 {
		t.Errorf("ECT(0) between wgpio gateways: TOS at hostB %#x", got)
	}
	// The router marks every outer packet toward gwB CE.
	if err := tp.MarkCE(w.Router, ifaceWith(t, w.Router, "198.18.2.254")); err != nil {
		t.Fatal(err)
	}
	if got := udpTOS(t, w, 0x02); got&3 != 3 {
		t.Errorf("ECT(0) inner, CE outer: TOS at hostB %#x, want CE", got)
	}
	if got := udpTOS(t, w, 0x00); got&3 != 0 {
		t.Errorf("Not-ECT inner, CE outer: TOS at hostB %#x, want Not-ECT (forwarded unchanged, as the kernel's WireGuard)", got)
	}
}

// udpTOS sends one UDP datagram with IP TOS tos from hostA to hostB and
// returns the TOS hostB received it with.
func udpTOS(t *testing.T, s *twosite.Site, tos int) int {
	t.Helper()
	var rc, sc *net.UDPConn
	if err := s.HostB.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9400})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, _ := rc.SyscallConn()
	raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) })
	if err := s.HostA.Do(func() (err error) {
		sc, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9400})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	raw, _ = sc.SyscallConn()
	raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos) })
	buf, oob := make([]byte, 64), make([]byte, 64)
	for try := 0; try < 5; try++ {
		sc.Write([]byte("ecn"))
		rc.SetReadDeadline(time.Now().Add(time.Second))
		_, oobn, _, _, err := rc.ReadMsgUDP(buf, oob)
		if err != nil {
			continue
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) > 0 {
				return int(m.Data[0])
			}
		}
		t.Fatal("no IP_TOS control message")
	}
	t.Fatalf("no datagram with TOS %#x reached hostB", tos)
	return -1
}
