package arp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// wire is an AF_PACKET socket bound to one interface inside a namespace:
// our side of the link in these tests, where a dataplane queue would be.
type wire struct {
	fd  int
	mac MAC
	idx int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openWire(t *testing.T, ns *topo.NS, dev string) *wire {
	t.Helper()
	w := &wire{fd: -1}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		w.idx = ifi.Index
		copy(w.mac[:], ifi.HardwareAddr)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		w.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			return os.NewSyscallError("bind", err)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		tv := unix.Timeval{Usec: 20000}
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if w.fd >= 0 {
		t.Cleanup(func() { unix.Close(w.fd) })
	}
	if err != nil {
		t.Fatalf("open packet socket on %s: %v", dev, err)
	}
	return w
}

func (w *wire) send(f []byte) error {
	_, err := unix.Write(w.fd, f)
	return err
}

// recv returns one frame that arrived on the link (not one we sent);
// n == 0 on timeout.
func (w *wire) recv(b []byte) (int, error) {
	for {
		n, from, err := unix.Recvfrom(w.fd, b, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		return n, nil
	}
}

// host is our side in owned mode: a wire, a Responder answering on it, a
// Table resolving through it, and the UDP frames that reached us.
type host struct {
	w    *wire
	r    *Responder
	tb   *Table
	p    *FrameProber
	udp  chan []byte
	ndp  chan []byte // NS/NA frames from the kernel, for known answers
	stop chan struct{}
	wg   sync.WaitGroup
}

func startHost(t *testing.T, w *wire, addrs []netip.Addr, cfg Config, skipDAD bool) *host {
	t.Helper()
	h := &host{w: w, udp: make(chan []byte, 64), ndp: make(chan []byte, 64), stop: make(chan struct{})}
	h.p = &FrameProber{MAC: w.mac, Send: func(f []byte) { _ = w.send(f) }}
	for _, a := range addrs {
		switch {
		case a.Is4():
			h.p.Src4 = a
		case a.IsLinkLocalUnicast():
			h.p.Src6LinkLocal = a
		default:
			h.p.Src6 = a
		}
	}
	cfg.Prober = h.p
	h.tb = NewTable(cfg)
	r, err := NewResponder(ResponderConfig{MAC: w.mac, Addrs: addrs, Table: h.tb, SkipDAD: skipDAD})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	if cfg.Now == nil {
		// A test that brings its own clock ticks the table itself.
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.tb.Run(h.stop, 20*time.Millisecond)
		}()
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		buf := make([]byte, 2048)
		var out [NDPFrameLen]byte
		for {
			select {
			case <-h.stop:
				return
			default:
			}
			n, err := w.recv(buf)
			if err != nil || n == 0 {
				continue
			}
			f := buf[:n]
			if _, rs := ParseNDP(f); rs == ReasonNone {
				select {
				case h.ndp <- append([]byte(nil), f...):
				default:
				}
			}
			m, rs := h.r.Handle(f, out[:])
			if m > 0 {
				_ = w.send(out[:m])
			}
			if rs == ReasonNotNeighbour && MAC(f[0:6]) == w.mac && isUDP(f) {
				select {
				case h.udp <- append([]byte(nil), f...):
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { close(h.stop); h.wg.Wait() })
	return h
}

func isUDP(f []byte) bool {
	switch binary.BigEndian.Uint16(f[12:14]) {
	case EtherTypeIPv4:
		return len(f) > 34 && f[23] == 17
	case EtherTypeIPv6:
		return len(f) > 54 && f[20] == 17
	}
	return false
}

// kernelSendUDP sends one datagram from the kernel of ns to dst, which
// makes the kernel resolve dst first.
func kernelSendUDP(t *testing.T, ns *topo.NS, dst netip.AddrPort, payload []byte) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	})
	if err != nil {
		t.Fatalf("send UDP to %v in %s: %v", dst, ns.Name, err)
	}
}

func waitUDP(t *testing.T, h *host, marker []byte) []byte {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-h.udp:
			if bytes.Contains(f, marker) {
				return f
			}
		case <-deadline:
			t.Fatalf("no datagram with %q arrived (responder drops %v, replies %d)", marker, h.r.DropCounts(), h.r.Replies())
			return nil
		}
	}
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

func kernelNeighMAC(t *testing.T, ns *topo.NS, dev string, ip netip.Addr) string {
	t.Helper()
	out, err := ns.Run("ip", "neigh", "show", "dev", dev, "to", ip.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func macOf(t *testing.T, ns *topo.NS, dev string) MAC {
	t.Helper()
	hw, err := ns.LinkMAC(dev)
	if err != nil {
		t.Fatal(err)
	}
	return MAC(hw)
}

// waitUp waits until the veth ends are operationally up. The kernel
// activates a device's queueing discipline in the same link-watch run that
// sets the operational state, which can lag "ip link set up" under load;
// until then frames sent on it are dropped silently.
func waitUp(t *testing.T, v *topo.Veth) {
	t.Helper()
	for _, e := range []struct {
		ns  *topo.NS
		dev string
	}{{v.NSA, v.A}, {v.NSB, v.B}} {
		if !waitFor(5*time.Second, func() bool {
			l, err := e.ns.Handle().LinkByName(e.dev)
			return err == nil && l.Attrs().OperState == netlink.OperUp
		}) {
			t.Fatalf("%s in %s is not operationally up after 5 s", e.dev, e.ns.Name)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var (
	usV4 = netip.MustParseAddr("198.18.0.1")
	kV4  = netip.MustParseAddr("198.18.0.2")
	usV6 = netip.MustParseAddr("2001:2::1") // RFC 5180 benchmarking prefix
	kV6  = netip.MustParseAddr("2001:2::2")
	usLL = netip.MustParseAddr("fe80::1")
	kLL  = netip.MustParseAddr("fe80::2")
)

// ownedPair makes two namespaces joined by a veth: ours, where the kernel
// has no address (IPv6 off on the veth, so the kernel answers nothing),
// and the kernel's, with IPv4, global and link-local IPv6 addresses.
func ownedPair(t *testing.T) (us, k *topo.NS, v *topo.Veth) {
	tp := testenv.Topology(t, "arpo")
	us, k = testenv.NS(t, tp, "u"), testenv.NS(t, tp, "k")
	v, err := tp.NewVeth(us, k, topo.VethConfig{})
	must(t, err)
	must(t, us.Sysctl("net.ipv6.conf."+v.A+".disable_ipv6", "1"))
	must(t, k.AddAddr(v.B, kV4.String()+"/24"))
	must(t, k.AddAddr(v.B, kV6.String()+"/64"))
	must(t, k.AddAddr(v.B, kLL.String()+"/64"))
	waitUp(t, v)
	waitNDPReady(t, k, v.B, kV6, kLL)
	return us, k, v
}

// waitNDPReady waits until the kernel of ns answers neighbour
// solicitations for addrs on dev: each address is no longer tentative and
// its solicited-node group is joined (RFC 4861 §7.2.1). The kernel does
// both in a work queue after the address is added, even without duplicate
// address detection, and drops a solicitation to a group not yet joined
// without counting it; on a loaded machine the first solicitation came
// before (TestOwnedExpireAndRefresh, about one run in a hundred). A
// minute bounds only a kernel that never gets there.
func waitNDPReady(t *testing.T, ns *topo.NS, dev string, addrs ...netip.Addr) {
	t.Helper()
	l, err := ns.Handle().LinkByName(dev)
	must(t, err)
	var missing []string
	ready := func() bool {
		missing = missing[:0]
		list, err := ns.Handle().AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			missing = append(missing, err.Error())
			return false
		}
		var groups []byte
		if err := ns.Do(func() (err error) {
			groups, err = os.ReadFile("/proc/thread-self/net/igmp6")
			return err
		}); err != nil {
			missing = append(missing, err.Error())
			return false
		}
		for _, a := range addrs {
			held := false
			for _, la := range list {
				if ip, ok := netip.AddrFromSlice(la.IP); ok && ip == a && la.Flags&unix.IFA_F_TENTATIVE == 0 {
					held = true
				}
			}
			if !held {
				missing = append(missing, a.String()+" (tentative or absent)")
			}
			b := a.As16()
			group := fmt.Sprintf("ff0200000000000000000001ff%02x%02x%02x", b[13], b[14], b[15])
			joined := false
			for _, line := range strings.Split(string(groups), "\n") {
				// index, device, group, users, flags, timer
				if f := strings.Fields(line); len(f) > 2 && f[1] == dev && f[2] == group {
					joined = true
				}
			}
			if !joined {
				missing = append(missing, "group "+group+" of "+a.String())
			}
		}
		return len(missing) == 0
	}
	if !waitFor(time.Minute, ready) {
		t.Fatalf("the kernel of %s does not answer solicitations on %s after a minute: %v", ns.Name, dev, missing)
	}
}

func TestOwnedKernelResolvesUs(t *testing.T) {
	us, k, v := ownedPair(t)
	w := openWire(t, us, v.A)
	h := startHost(t, w, []netip.Addr{usV4, usV6, usLL}, Config{}, false)
	var sent sync.Mutex
	send := func(f []byte) error { sent.Lock(); defer sent.Unlock(); return w.send(f) }
	// Our solicited-node groups, joined on our interface, whose IPv6 is
	// disabled (the kernel must not answer for our addresses): at the
	// link layer only (TestJoinGroupsMLD has the socket's join).
	var groups *Membership
	must(t, us.Do(func() error {
		var err error
		if groups, err = JoinGroups(v.A, h.r.SolicitedNodeGroups()); err != nil {
			return err
		}
		if lo := groups.LinkOnly(); len(lo) != 1 {
			return fmt.Errorf("joined at the link layer only: %v, want the one group (IPv6 disabled)", lo)
		}
		b, err := os.ReadFile("/proc/thread-self/net/dev_mcast")
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "3333ff000001") {
			return fmt.Errorf("dev_mcast has no 33:33:ff:00:00:01:\n%s", b)
		}
		return nil
	}))
	defer func() { must(t, us.Do(groups.Close)) }()
	if err := h.r.DAD(send, 1, 300*time.Millisecond); err != nil {
		t.Fatalf("DAD(%v) = %v, want no conflict", []netip.Addr{usV6, usLL}, err)
	}
	must(t, h.r.Announce(send))
	for _, tt := range []struct {
		name string
		dst  netip.AddrPort
	}{
		{"ipv4", netip.AddrPortFrom(usV4, 9000)},
		{"ipv6 global", netip.AddrPortFrom(usV6, 9001)},
		{"ipv6 link-local", netip.AddrPortFrom(usLL.WithZone(v.B), 9002)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			marker := []byte("hello-" + tt.name)
			kernelSendUDP(t, k, tt.dst, marker)
			f := waitUDP(t, h, marker)
			if MAC(f[0:6]) != w.mac {
				t.Errorf("datagram to MAC %v, want ours %v", MAC(f[0:6]), w.mac)
			}
			if got := kernelNeighMAC(t, k, v.B, tt.dst.Addr().WithZone("")); !strings.Contains(got, w.mac.String()) {
				t.Errorf("kernel neighbour for %v = %q, want lladdr %v", tt.dst.Addr(), got, w.mac)
			}
		})
	}
	// Known answers from the kernel: each NS/NA it sent parses, and
	// building the parsed message again gives the kernel's bytes,
	// checksum included.
	if len(h.ndp) == 0 {
		t.Error("no NS/NA from the kernel was captured")
	}
	for n := len(h.ndp); n > 0; n-- {
		f := <-h.ndp
		t.Logf("kernel NDP frame: %x", f)
		m, _ := ParseNDP(f)
		var b [NDPFrameLen]byte
		l, err := m.Marshal(b[:])
		if err == nil && l != len(f) {
			continue // other options (a DAD nonce, RFC 7527) or padding: parsing it is the check
		}
		if err != nil || string(b[:l]) != string(f) {
			t.Errorf("Marshal(ParseNDP(kernel frame %x)) = %x, %v; want the same bytes", f, b[:l], err)
		}
	}
	// The kernel talked to us, so it is learnt (its requests were
	// addressed to us), but nothing else is.
	if st, mac := h.tb.State(kV4); !st.usable() || mac != macOf(t, k, v.B) {
		t.Errorf("State(%v) = %v, %v; want learnt at %v", kV4, st, mac, macOf(t, k, v.B))
	}
}

func TestOwnedDADConflictWithKernel(t *testing.T) {
	us, _, v := ownedPair(t)
	w := openWire(t, us, v.A)
	h := startHost(t, w, []netip.Addr{kV6}, Config{}, false) // the kernel owns it
	// RFC 4862's defaults (one probe, RetransTimer 1 s) three times over:
	// on a loaded machine the kernel's answer took longer than 500 ms.
	err := h.r.DAD(w.send, 3, time.Second)
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Conflicts[0].Addr != kV6 {
		t.Fatalf("DAD(%v) = %v, want a conflict for it; drops %v", kV6, err, h.r.DropCounts())
	}
}

func TestOwnedWeResolveKernel(t *testing.T) {
	us, k, v := ownedPair(t)
	w := openWire(t, us, v.A)
	h := startHost(t, w, []netip.Addr{usV4, usV6, usLL}, Config{}, true)
	kmac := macOf(t, k, v.B)
	for _, ip := range []netip.Addr{kV4, kV6, kLL} {
		t.Run(ip.String(), func(t *testing.T) {
			h.tb.Resolve(ip)
			if !waitFor(3*time.Second, func() bool { _, ok := h.tb.Lookup(ip); return ok }) {
				st, _ := h.tb.State(ip)
				t.Fatalf("Lookup(%v) never hit; state %v, drops %v", ip, st, h.r.DropCounts())
			}
			if mac, _ := h.tb.Lookup(ip); mac != kmac {
				t.Errorf("Lookup(%v) = %v, want %v", ip, mac, kmac)
			}
			if st, _ := h.tb.State(ip); st != StateReachable {
				t.Errorf("State(%v) = %v, want reachable", ip, st)
			}
		})
	}
}

// TestOwnedExpireAndRefresh: a neighbour in use is probed by unicast
// RefreshBefore ahead of its expiry (RFC 4861 §7.3.3's PROBE, done early
// so that it never leaves the hot path), the kernel's answer confirms it
// again before it expires, and it is usable all along; one not in use
// since its last confirmation is not probed and turns stale at expiry,
// still usable, and is probed at once when used. The table's clock is the
// test's (Config.Now, Tick called here), so only the kernel's answers are
// waited for: each request is answered once, and a minute bounds only an
// answer that never comes.
func TestOwnedExpireAndRefresh(t *testing.T) {
	us, k, v := ownedPair(t)
	w := openWire(t, us, v.A)
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	const reachable, refresh = 30 * time.Second, 5 * time.Second
	h := startHost(t, w, []netip.Addr{usV4, usV6}, Config{
		ReachableTime: reachable, RefreshBefore: refresh, RetransTimer: time.Second,
		StaleTime: 10 * reachable, Now: clk.Now,
	}, true)
	kmac := macOf(t, k, v.B)
	// at sets the clock to when and ticks; it checks ip's state and the
	// requests sent by the tick, and that ip is in the hot path (peek:
	// without marking it used).
	at := func(t *testing.T, ip netip.Addr, when time.Time, want State, requests uint64, what string) {
		t.Helper()
		before := h.tb.Stats()
		clk.Add(when.Sub(clk.Now()))
		h.tb.Tick()
		st, _ := h.tb.State(ip)
		mac, ok := h.tb.Peek(ip)
		after := h.tb.Stats()
		if want == StateProbe && st == StateReachable && after.Confirmed > before.Confirmed {
			st = StateProbe // the answer came already; awaitConfirmed checks it
		}
		if got := after.Requests - before.Requests; st != want || !ok || mac != kmac || got != requests {
			t.Fatalf("%s: State(%v) = %v, in the hot path %v (%v), %d requests; want %v, true (%v), %d requests",
				what, ip, st, ok, mac, got, want, kmac, requests)
		}
	}
	for _, ip := range []netip.Addr{kV4, kV6} {
		t.Run(ip.String(), func(t *testing.T) {
			t.Cleanup(func() { h.tb.Delete(ip) })
			confirmations := h.tb.Stats().Confirmed
			h.tb.Resolve(ip)
			confirmations++
			awaitConfirmed(t, h, ip, confirmations, kmac)
			confirmed := clk.Now()
			// In use: three refreshes, each answered before the
			// expiry it averts.
			for i := range 3 {
				if mac, ok := h.tb.Lookup(ip); !ok || mac != kmac {
					t.Fatalf("refresh %d: Lookup(%v) = %v, %v; want %v", i, ip, mac, ok, kmac)
				}
				due := confirmed.Add(reachable - refresh)
				at(t, ip, due.Add(-time.Millisecond), StateReachable, 0, fmt.Sprintf("refresh %d, 1 ms early", i))
				at(t, ip, due, StateProbe, 1, fmt.Sprintf("refresh %d, due", i))
				confirmations++
				awaitConfirmed(t, h, ip, confirmations, kmac)
				at(t, ip, confirmed.Add(reachable), StateReachable, 0, fmt.Sprintf("refresh %d, at the expiry it averted", i))
				confirmed = due
			}
			// Not in use since: no refresh, stale at expiry.
			at(t, ip, confirmed.Add(reachable-refresh), StateReachable, 0, "unused, at the refresh point")
			at(t, ip, confirmed.Add(reachable), StateStale, 0, "unused, at expiry")
			// Used when stale: probed at the next tick, confirmed.
			if _, ok := h.tb.Lookup(ip); !ok {
				t.Fatalf("Lookup(%v) missed a stale entry", ip)
			}
			at(t, ip, clk.Now(), StateProbe, 1, "stale and used")
			confirmations++
			awaitConfirmed(t, h, ip, confirmations, kmac)
		})
	}
}

// awaitConfirmed waits until h's table has counted n confirmations, then
// checks that the last was ip's at mac and that no other came. A minute
// bounds only an answer that never comes.
func awaitConfirmed(t *testing.T, h *host, ip netip.Addr, n uint64, mac MAC) {
	t.Helper()
	if !waitFor(time.Minute, func() bool { return h.tb.Stats().Confirmed >= n }) {
		st, _ := h.tb.State(ip)
		var frames []string
		for len(h.ndp) > 0 {
			frames = append(frames, fmt.Sprintf("%x", <-h.ndp))
		}
		t.Fatalf("no answer from %v within a minute: %d confirmations, want %d; state %v, stats %+v, responder drops %v; NDP frames in:\n%s",
			ip, h.tb.Stats().Confirmed, n, st, h.tb.Stats(), h.r.DropCounts(), strings.Join(frames, "\n"))
	}
	if got := h.tb.Stats().Confirmed; got != n {
		t.Fatalf("%d confirmations, want %d: an answer came that was not asked for", got, n)
	}
	if st, m := h.tb.State(ip); st != StateReachable || m != mac {
		t.Fatalf("State(%v) after its answer = %v, %v; want reachable, %v", ip, st, m, mac)
	}
}
