//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// churnRate is the datagrams per second of each direction's flow, and
// churnLen how long the flows run: churnRate × churnLen datagrams a
// direction, every one numbered.
const (
	churnRate = 3000
	churnLen  = 12 * time.Second
)

// churnFlow is one direction's numbered UDP flow: host A → host B or back.
// The sender stamps each datagram with its sequence number and records
// when it sent it; the receiver marks what arrived, counts duplicates and
// datagrams that arrived after one sent later (reordering).
type churnFlow struct {
	name     string
	send     *net.UDPConn
	recv     *net.UDPConn
	n        int
	sentAt   []time.Duration // per sequence number, since the start
	sent     atomic.Int64    // datagrams sent so far
	mu       sync.Mutex
	seen     []bool
	received int
	dups     int
	late     []int // sequence numbers that arrived after a later one
	highest  int
	last     atomic.Int64 // UnixNano of the last datagram read
	done     chan struct{}
	recvDone chan struct{}
}

// newChurnFlow opens a flow from ns src (bound to from) to ns dst's to.
func newChurnFlow(t *testing.T, name string, src, dst *topo.NS, from, to netip.AddrPort, n int) *churnFlow {
	t.Helper()
	f := &churnFlow{name: name, n: n, sentAt: make([]time.Duration, n), seen: make([]bool, n), highest: -1,
		done: make(chan struct{}), recvDone: make(chan struct{})}
	if err := dst.Do(func() (err error) {
		f.recv, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.recv.Close() })
	if raw, err := f.recv.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			// Room for the whole flow: the receiver's socket never drops.
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		})
	}
	if err := src.Do(func() (err error) {
		f.send, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(from), net.UDPAddrFromAddrPort(to))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.send.Close() })
	go f.receive()
	return f
}

func (f *churnFlow) receive() {
	defer close(f.recvDone)
	buf := make([]byte, 2048)
	for {
		k, err := f.recv.Read(buf)
		if err != nil {
			return
		}
		f.last.Store(time.Now().UnixNano())
		if k < 8 || binary.BigEndian.Uint32(buf[4:]) != churnMagic {
			continue
		}
		seq := int(binary.BigEndian.Uint32(buf))
		if seq >= f.n {
			continue
		}
		f.mu.Lock()
		switch {
		case f.seen[seq]:
			f.dups++
		default:
			f.seen[seq] = true
			f.received++
			if seq < f.highest {
				f.late = append(f.late, seq)
			}
			f.highest = max(f.highest, seq)
		}
		f.mu.Unlock()
	}
}

// churnMagic follows the sequence number in every datagram of a flow.
const churnMagic = 0x77677069

// run sends the flow at churnRate from start, then closes done.
func (f *churnFlow) run(start time.Time) {
	defer close(f.done)
	msg := make([]byte, 64)
	binary.BigEndian.PutUint32(msg[4:], churnMagic)
	for i := range f.n {
		due := time.Duration(float64(i) / churnRate * float64(time.Second))
		if d := due - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		binary.BigEndian.PutUint32(msg, uint32(i))
		f.sentAt[i] = time.Since(start)
		f.send.Write(msg) // an error (a route gone) is a loss the ledger weighs
		f.sent.Store(int64(i + 1))
	}
}

// missing returns the sequence numbers that never arrived.
func (f *churnFlow) missing() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for i, ok := range f.seen {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// churnEvent is one step of the churn and when it ran, since the start.
type churnEvent struct {
	name       string
	start, end time.Duration
}

// ledgerSnap is every counter that could take a datagram of a direction
// between its sending host and its receiving host, read at one moment.
type ledgerSnap struct {
	drops    [2]fastpath.DropCounts // per gateway (A, B)
	held     [2]uint64
	ports    [2][2]dataplane.Stats // per gateway, WAN then LAN
	excDrops [2]uint64
	links    uint64
	linkInfo string
	kernel   map[string]uint64 // "ns counter" → value (nstat)
}

// churnKernelCounters are the kernel's IP and UDP counters that count a
// datagram the kernel of a namespace on the path did not deliver or
// forward: what an XDP program passed to it that it had no route for,
// or a socket without room.
var churnKernelCounters = []string{"IpInAddrErrors", "IpInNoRoutes", "IpOutNoRoutes", "IpInDiscards", "IpOutDiscards",
	"UdpRcvbufErrors", "UdpSndbufErrors", "UdpNoPorts", "Ip6InNoRoutes", "Ip6OutNoRoutes", "Ip6InAddrErrors"}

func readLedger(t *testing.T, s *twosite.Site) ledgerSnap {
	t.Helper()
	var l ledgerSnap
	l.kernel = map[string]uint64{}
	for i, g := range []*fastgw.Gateway{s.Gateway, s.PeerGateway} {
		if g == nil {
			continue // a stock wireguard-go peer: no counters
		}
		qs := g.Engine().Stats()
		l.drops[i] = fastpath.TotalDrops(qs)
		for _, q := range qs {
			l.held[i] += q.Held
		}
		wan, lan := g.Ports()
		l.ports[i] = [2]dataplane.Stats{wan.Stats(), lan.Stats()}
		l.excDrops[i] = g.ExceptionDrops()
	}
	var err error
	if l.links, l.linkInfo, err = topo.LinkDrops(s.HostA, s.GwA, s.Router, s.GwB, s.HostB); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*topo.NS{s.HostA, s.GwA, s.Router, s.GwB, s.HostB} {
		out, err := ns.Run("nstat", append([]string{"-asz"}, churnKernelCounters...)...)
		if err != nil {
			t.Fatalf("nstat in %s: %v: %s", ns.Name, err, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && slices.Contains(churnKernelCounters, f[0]) {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				l.kernel[ns.Name+" "+f[0]] = v
			}
		}
	}
	return l
}

// portLosses is what a port's stats count as lost frames, and the XDP
// program's pass verdicts (frames left to the kernel).
func portLosses(s dataplane.Stats) (lost, passed uint64) {
	lost = s.Drops.Total() + s.RingFull
	for _, k := range dataplane.LossCounters {
		lost += s.Backend[k]
	}
	for k, v := range s.Backend {
		if strings.HasPrefix(k, "xdp_pass") {
			passed += v
		}
	}
	return lost, passed
}

// inboundOnly and outboundOnly are the drop reasons only a worker's
// inbound (WAN → LAN) or only its outbound (LAN → WAN) path counts; every
// other reason may take a packet of either.
var (
	inboundOnly = []fastpath.DropReason{fastpath.DropWANMalformed, fastpath.DropNotForUs, fastpath.DropBadType,
		fastpath.DropShortData, fastpath.DropUnknownIndex, fastpath.DropExpired, fastpath.DropCounterLimit,
		fastpath.DropAuth, fastpath.DropReplay, fastpath.DropInnerMalformed, fastpath.DropAllowedIPs,
		fastpath.DropNoNeighbour, fastpath.DropLANTooBig, fastpath.DropWANVLAN, fastpath.DropWANTooBig}
	outboundOnly = []fastpath.DropReason{fastpath.DropMalformed, fastpath.DropNotIP, fastpath.DropNoRoute,
		fastpath.DropTooBig, fastpath.DropHeldOverflow, fastpath.DropNonceExhausted, fastpath.DropHandshakeGaveUp,
		fastpath.DropFragmentNoBuffer, fastpath.DropVLAN, fastpath.DropPeerRemoved, fastpath.DropHostMulticast}
)

// explained sums, from before to after, every counter that could have
// taken a datagram of the direction from gateway in (0: A, 1: B; it
// encrypts) to gateway out (it decrypts), with a description: in's
// outbound and out's inbound drops by reason (and those of either path),
// the packets both still hold, the ports' losses, both exception TUNs'
// drops, the links' drops and the kernel's counters in every namespace
// of the path. passed lists in's LAN and out's WAN XDP pass verdicts:
// frames left to the kernel are not lost by that, and not counted in
// total: the kernel either forwards them (into an exception TUN, where
// the engine counts what it drops; anywhere else the WAN capture sees
// it) or drops them and counts that (its counters are in total).
func explained(before, after ledgerSnap, in, out int) (total uint64, detail, passed []string) {
	add := func(name string, d uint64) {
		if d > 0 {
			total += d
			detail = append(detail, fmt.Sprintf("%s=%d", name, d))
		}
	}
	gw := []string{"A", "B"}
	for r := range fastpath.NumDropReasons {
		if !slices.Contains(inboundOnly, r) {
			add(gw[in]+" "+r.String(), after.drops[in][r]-before.drops[in][r])
		}
		if !slices.Contains(outboundOnly, r) {
			add(gw[out]+" "+r.String(), after.drops[out][r]-before.drops[out][r])
		}
	}
	for _, p := range []struct {
		gw, side int // side 0: WAN, 1: LAN
		pass     bool
	}{{in, 1, true}, {in, 0, false}, {out, 0, true}, {out, 1, false}} {
		l1, p1 := portLosses(after.ports[p.gw][p.side])
		l0, p0 := portLosses(before.ports[p.gw][p.side])
		name := gw[p.gw] + " " + [2]string{"WAN", "LAN"}[p.side]
		add(name+" port losses", l1-l0)
		if p.pass && p1 > p0 {
			passed = append(passed, fmt.Sprintf("%s xdp_pass=%d", name, p1-p0))
		}
	}
	for i := range gw {
		add(gw[i]+" held", after.held[i])
		add(gw[i]+" exception TUN drops", after.excDrops[i]-before.excDrops[i])
	}
	add("links", after.links-before.links)
	for k, v := range after.kernel {
		add(k, v-before.kernel[k])
	}
	slices.Sort(detail)
	return total, detail, passed
}

// TestChurnLedger runs a numbered UDP flow each way between host A and
// host B through two wgpio gateways (through a router, both with a
// default route toward it, as gateways on the Internet have) while the
// control plane churns: a new handshake over live sessions, a peer
// removed and added again over the UAPI, an endpoint change, the LAN
// neighbours flushed, the exception TUN down and up, and allowed IPs
// reloaded. Then it balances the ledger: every datagram sent arrived once,
// or a counter on its path took it; none arrived after one sent later
// but for what a churn step explains; and every UDP datagram on the WAN
// is a WireGuard message, no inner packet in cleartext. Then the same
// against a stock wireguard-go peer, whose drops have no counter: there
// the ledger and the order are only reported (its goroutines are not
// pinned), the WAN checked.
func TestChurnLedger(t *testing.T) {
	t.Run("wgpio", func(t *testing.T) { testChurnLedger(t, false) })
	t.Run("stock", func(t *testing.T) { testChurnLedger(t, true) })
}

func testChurnLedger(t *testing.T, stock bool) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	testenv.Tool(t, "wg", "wireguard-tools")
	// Each gateway's worker pinned to a CPU of its own, as
	// fastgw.Config.CPUs asks on veth: the worker's transmit runs the
	// next hop's receive (a veth without XDP: the router's, the hosts')
	// on the worker's CPU, so a worker that migrates under load delivers
	// a flow out of order (seen at load 8: 27 datagrams of B→A).
	s := newSite(t, twosite.Config{PeerFastPath: !stock, Routed: true, CPUs: []int{0}, PeerCPUs: []int{1}})
	// Gateways on the Internet route what is not theirs to their WAN
	// router: a packet the kernel gets from an XDP pass verdict goes
	// there, not into a void.
	for _, r := range []struct {
		ns *topo.NS
		gw string
	}{{s.GwA, "198.18.1.254"}, {s.GwB, "198.18.2.254"}} {
		if err := r.ns.AddRoute("default", r.gw, ""); err != nil {
			t.Fatal(err)
		}
		if err := r.ns.Forwarding(); err != nil {
			t.Fatal(err)
		}
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	dir := t.TempDir()
	var caps []*testenv.Capture
	for _, addr := range []string{"198.18.1.254", "198.18.2.254"} {
		caps = append(caps, testenv.StartCapture(t, tcpdump, s.Router, ifaceWith(t, s.Router, addr), dir+"/wan-"+addr+".pcap", "ip or ip6"))
	}

	n := int(churnRate * churnLen / time.Second)
	ab := newChurnFlow(t, "A→B", s.HostA, s.HostB, netip.AddrPortFrom(twosite.HostA4, 9301), netip.AddrPortFrom(twosite.HostB4, 9302), n)
	ba := newChurnFlow(t, "B→A", s.HostB, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9303), netip.AddrPortFrom(twosite.HostA4, 9304), n)
	before := readLedger(t, s)

	keyA := s.FastConfig.PrivateKey.PublicKey().String()
	keyB := s.FastConfig.Peers[0].PublicKey.String()
	allowedB := "198.19.2.0/24,198.19.100.2/32,2001:db8:2::/64"
	allowedA := "198.19.1.0/24,198.19.100.1/32,2001:db8:1::/64"
	start := time.Now()
	var events []churnEvent
	step := func(name string, fn func()) {
		time.Sleep(time.Until(start.Add(time.Duration(len(events)+1) * churnLen / 8)))
		e := churnEvent{name: name, start: time.Since(start)}
		fn()
		e.end = time.Since(start)
		events = append(events, e)
	}
	run := func(ns *topo.NS, name string, args ...string) {
		if out, err := ns.Run(name, args...); err != nil {
			t.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), ns.Name, err, out)
		}
	}
	go ab.run(start)
	go ba.run(start)
	step("new handshake over live sessions (B removes and re-adds A)", func() {
		wgCmd(t, "set", s.StockName, "peer", keyA, "remove")
		wgCmd(t, "set", s.StockName, "peer", keyA, "endpoint", "198.18.1.1:51820", "allowed-ips", allowedA)
	})
	step("peer removed and re-added at A", func() {
		wgCmd(t, "set", s.GwName, "peer", keyB, "remove")
		time.Sleep(50 * time.Millisecond)
		wgCmd(t, "set", s.GwName, "peer", keyB, "endpoint", "198.18.2.2:51820", "allowed-ips", allowedB)
	})
	step("endpoint change (A sends to B's second WAN address)", func() {
		if err := s.GwB.AddAddr(s.WANB, "198.18.2.3/24"); err != nil {
			t.Error(err)
		}
		time.Sleep(100 * time.Millisecond)
		wgCmd(t, "set", s.GwName, "peer", keyB, "endpoint", "198.18.2.3:51820")
	})
	step("LAN neighbours flushed", func() {
		run(s.GwA, "ip", "neigh", "flush", "dev", s.LANA)
		run(s.GwB, "ip", "neigh", "flush", "dev", s.LANB)
	})
	step("exception TUN down and up", func() {
		run(s.GwA, "ip", "link", "set", s.GwName, "down")
		time.Sleep(100 * time.Millisecond)
		run(s.GwA, "ip", "link", "set", s.GwName, "up")
	})
	step("allowed IPs reloaded (same set, then one more prefix, then back)", func() {
		wgCmd(t, "set", s.GwName, "peer", keyB, "allowed-ips", allowedB)
		wgCmd(t, "set", s.GwName, "peer", keyB, "allowed-ips", allowedB+",198.19.3.0/24")
		wgCmd(t, "set", s.GwName, "peer", keyB, "allowed-ips", allowedB)
	})
	<-ab.done
	<-ba.done
	// Let what is in flight arrive and what is held go or be counted
	// (a packet waits at most 3 s for a neighbour).
	testenv.PollUntil(10*time.Second, func() bool {
		quiet := time.Now().UnixNano()-max(ab.last.Load(), ba.last.Load()) > int64(time.Second)
		held := queueHeld(s.Gateway)
		if !stock {
			held += queueHeld(s.PeerGateway)
		}
		return quiet && held == 0
	})
	after := readLedger(t, s)
	for _, c := range caps {
		c.Stop()
	}

	t.Logf("churn steps:")
	for _, e := range events {
		t.Logf("  %6.3f–%6.3f s %s", e.start.Seconds(), e.end.Seconds(), e.name)
	}
	for i, f := range []*churnFlow{ab, ba} {
		miss := f.missing()
		counted, detail, passed := explained(before, after, i, 1-i)
		f.mu.Lock()
		t.Logf("%s: sent %d, received %d, duplicates %d, lost %d, arrived after a later one %d", f.name, f.n, f.received, f.dups, len(miss), len(f.late))
		if f.dups > 0 {
			t.Errorf("%s: %d duplicates", f.name, f.dups)
		}
		late := slices.Clone(f.late)
		f.mu.Unlock()
		for _, r := range seqRuns(miss) {
			w, _ := f.when(r, events)
			t.Logf("  %s lost %s, sent at %s", f.name, r, w)
		}
		for _, r := range seqRuns(late) {
			w, explained := f.when(r, events)
			t.Logf("  %s reordered %s, sent at %s", f.name, r, w)
			switch {
			case !explained && stock:
				// wireguard-go's goroutines move between CPUs, and on veth
				// the receive of what they send or write to the TUN runs
				// on the sender's CPU: not wgpio's to keep in order.
				t.Logf("  %s: %s out of order away from the churn: with a stock wireguard-go peer, not held against wgpio", f.name, r)
			case !explained:
				t.Errorf("%s: %s arrived after a datagram sent later, away from every churn step", f.name, r)
			}
		}
		t.Logf("  %s counters that could take its datagrams: %d: %s; left to the kernel: %s", f.name, counted, strings.Join(detail, ", "), strings.Join(passed, ", "))
		switch lost := uint64(len(miss)); {
		case lost > counted && stock:
			t.Logf("  %s: %d lost beyond what wgpio and the kernel counted: in the stock wireguard-go peer, whose drops have no counter", f.name, lost-counted)
		case lost > counted:
			t.Errorf("%s: %d datagrams lost, its counters explain at most %d: %d lost without a counter", f.name, lost, counted, lost-counted)
		}
	}
	for _, c := range caps {
		frames, leaks := wanLeaks(t, c.File())
		if frames < n/2 {
			t.Errorf("WAN %s: %d frames captured, want at least %d", c.File(), frames, n/2)
		}
		for _, leak := range leaks[:min(len(leaks), 5)] {
			t.Errorf("WAN %s: %s", c.File()[strings.LastIndex(c.File(), "/")+1:], leak)
		}
		if len(leaks) > 5 {
			t.Errorf("WAN %s: %d more such packets", c.File()[strings.LastIndex(c.File(), "/")+1:], len(leaks)-5)
		}
	}
}

// seqRun is a run of consecutive sequence numbers.
type seqRun struct{ first, last int }

func (r seqRun) String() string {
	if r.first == r.last {
		return fmt.Sprintf("#%d", r.first)
	}
	return fmt.Sprintf("#%d–#%d (%d)", r.first, r.last, r.last-r.first+1)
}

func seqRuns(seqs []int) []seqRun {
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	var out []seqRun
	for _, s := range seqs {
		if len(out) > 0 && out[len(out)-1].last == s-1 {
			out[len(out)-1].last = s
			continue
		}
		out = append(out, seqRun{s, s})
	}
	return out
}

// when says when a run was sent and which churn steps ran then or just
// before (within churnAfter), and whether there was one.
func (f *churnFlow) when(r seqRun, events []churnEvent) (s string, near bool) {
	from, to := f.sentAt[r.first], f.sentAt[r.last]
	s = fmt.Sprintf("%.3f–%.3f s", from.Seconds(), to.Seconds())
	for _, e := range events {
		if from <= e.end+churnAfter && to >= e.start {
			s += " (during/after: " + e.name + ")"
			near = true
		}
	}
	return s, near
}

// churnAfter is how long after a churn step its effects may last: a
// handshake (the initiation waits for the tick, at most a few ms), a
// neighbour resolved again, frames on the kernel's path into the
// exception TUN (passed before a prefix entered the LAN map again)
// overtaken by those the XDP program redirects after it.
const churnAfter = 500 * time.Millisecond
