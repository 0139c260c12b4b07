//go:build linux

package kernelsock

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// logBuf is a log's text, safe for concurrent use.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the text logged since the last take.
func (l *logBuf) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

type got struct {
	src, dst netip.AddrPort
	msg      string
}

// TestSet: a Set's sockets, opened in another namespace than the test's
// thread, deliver each datagram with its source and the socket's address
// and port, on every port of the range; a port another socket holds fails
// Open with EADDRINUSE and leaves the Set as it was; Commit moves to the
// new port and closes the old one's sockets; Sync closes the sockets of an
// address gone and opens one for an address new; Close ends it all. A
// socket that could not be opened is logged when the Set goes on without
// it, not when the caller refuses the port (Abort).
func TestSet(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a1, a2 := netip.MustParseAddr("198.18.77.1"), netip.MustParseAddr("198.18.77.2")
	a6 := netip.MustParseAddr("2001:2:0:77::1")
	ns := loopbackNS(t, "ks", a1, a2, a6)
	ch := make(chan got, 16)
	var logged logBuf
	s := New(slog.New(slog.NewTextHandler(&logged, nil)), ns.NsHandle(), 2, func(src, dst netip.AddrPort, msg []byte) {
		ch <- got{src, dst, string(msg)}
	})
	defer s.Close()
	// send sends msg to dst from the namespace and returns what was
	// delivered, if anything, within wait.
	send := func(dst netip.AddrPort, msg string, wait time.Duration) (got, bool) {
		t.Helper()
		var src netip.AddrPort
		if err := ns.Do(func() error {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				return err
			}
			defer c.Close()
			src = c.LocalAddr().(*net.UDPAddr).AddrPort()
			_, err = c.Write([]byte(msg))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-ch:
			if g.src.Port() != src.Port() || g.src.Addr() != src.Addr().Unmap() {
				t.Errorf("datagram to %v: source %v, want %v", dst, g.src, src)
			}
			return g, true
		case <-time.After(wait):
			return got{}, false
		}
	}
	// delivered waits long for a datagram that must come (a loaded
	// machine), briefly for one that must not.
	delivered := func(dst netip.AddrPort) bool {
		t.Helper()
		g, ok := send(dst, "hello "+dst.String(), 10*time.Second)
		if ok && (g.dst != dst || g.msg != "hello "+dst.String()) {
			t.Errorf("datagram to %v delivered as %q to %v", dst, g.msg, g.dst)
		}
		return ok
	}
	silent := func(dst netip.AddrPort) bool {
		t.Helper()
		_, ok := send(dst, "x", 200*time.Millisecond)
		return !ok
	}

	if err := s.Listen(41000, a1, netip.Addr{}, a6); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []netip.AddrPort{
		netip.AddrPortFrom(a1, 41000), netip.AddrPortFrom(a1, 41001), netip.AddrPortFrom(a6, 41000), netip.AddrPortFrom(a6, 41001),
	} {
		if !delivered(dst) {
			t.Errorf("datagram to %v not delivered", dst)
		}
	}
	if !silent(netip.AddrPortFrom(a2, 41000)) {
		t.Error("datagram to an address not listened on delivered")
	}

	// A port the host holds: refused, the Set unchanged.
	var held *net.UDPConn
	if err := ns.Do(func() (err error) {
		held, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a1, 41101)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Open(41100, a1, a6)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Open on a port held = %v, want EADDRINUSE", err)
	}
	p.Abort()
	// The port refused, its fragments were never to come: a warning
	// that they are lost (wg set NAME listen-port N refused with
	// EADDRINUSE, the gateway still on its old port) misled.
	if l := logged.take(); strings.Contains(l, "fragmented WireGuard packets") {
		t.Errorf("an aborted Open logged lost fragments:\n%s", l)
	}
	if !delivered(netip.AddrPortFrom(a1, 41000)) || !silent(netip.AddrPortFrom(a6, 41100)) {
		t.Error("after an aborted Open: want the old port delivered, the new one not")
	}
	// The same failure committed (the Set now goes without that socket):
	// logged, with the address and port.
	p, err = s.Open(41100, a1)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Open on a port held = %v, want EADDRINUSE", err)
	}
	p.Commit()
	if l := logged.take(); !strings.Contains(l, "fragmented WireGuard packets to this port are lost") || !strings.Contains(l, "port=41101") {
		t.Errorf("a committed Open without the socket of port 41101: log %q, want the lost fragments named", l)
	}
	held.Close()

	// A port move.
	p, err = s.Open(41200, a1, a6)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit()
	if !delivered(netip.AddrPortFrom(a6, 41201)) || !silent(netip.AddrPortFrom(a6, 41000)) {
		t.Error("after a move to 41200: want 41201 delivered, the old port not")
	}

	// The addresses change: a1 goes, a2 comes, a6 stays.
	s.Sync(a2, a6)
	if !delivered(netip.AddrPortFrom(a2, 41200)) || !delivered(netip.AddrPortFrom(a6, 41200)) || !silent(netip.AddrPortFrom(a1, 41200)) {
		t.Error("after Sync: want a2 and a6 delivered, a1 not")
	}

	s.Close()
	s.Sync(a1, a2, a6) // an address follower's late update opens nothing
	if p, err := s.Open(41300, a1); !errors.Is(err, net.ErrClosed) || len(p.socks) != 0 {
		t.Errorf("Open after Close = %d sockets, %v; want none, net.ErrClosed", len(p.socks), err)
	}
	if !silent(netip.AddrPortFrom(a2, 41200)) || !silent(netip.AddrPortFrom(a1, 41200)) {
		t.Error("datagram delivered after Close")
	}
}

// loopbackNS makes a namespace (of a topology named tag) whose loopback
// is up and holds addrs (IPv6 ones without duplicate address detection).
func loopbackNS(t *testing.T, tag string, addrs ...netip.Addr) *topo.NS {
	t.Helper()
	ns, err := testenv.Topology(t, tag).NewNS("a")
	if err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for _, a := range addrs {
		if a.Is4() {
			cmds = append(cmds, []string{"addr", "add", a.String() + "/32", "dev", "lo"})
		} else {
			cmds = append(cmds, []string{"addr", "add", a.String() + "/128", "dev", "lo", "nodad"})
		}
	}
	for _, args := range cmds {
		if out, err := ns.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	return ns
}

// TestRcvBuf: each socket gets a receive buffer of RcvBuf (the test runs
// as root: SO_RCVBUFFORCE), not the kernel's default of some 45
// reassembled datagrams, which a peer that fragments everything overran
// whenever the reader was not scheduled for 2 ms (Udp6RcvbufErrors).
func TestRcvBuf(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a4, a6 := netip.MustParseAddr("198.18.78.1"), netip.MustParseAddr("2001:2:0:78::1")
	ns := loopbackNS(t, "ksb", a4, a6)
	s := New(slog.New(slog.DiscardHandler), ns.NsHandle(), 1, func(src, dst netip.AddrPort, msg []byte) {})
	defer s.Close()
	if err := s.Listen(41100, a4, a6); err != nil {
		t.Fatal(err)
	}
	if len(s.socks) != 2 {
		t.Fatalf("%d sockets, want 2", len(s.socks))
	}
	for _, c := range s.socks {
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var gerr error
		rc.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		// The kernel reports twice what was set (its bookkeeping share).
		if n < RcvBuf {
			t.Errorf("socket %v: receive buffer %d bytes, want at least %d", c.LocalAddr(), n, RcvBuf)
		}
	}
}

// TestDrops: datagrams that overflow a socket's receive buffer while its
// reader does not read are counted by Drops, as many as the kernel counts
// at the socket (the drops column of /proc/net/udp and udp6), and stay
// counted once the socket is closed (an address gone, a stop). Before,
// such drops were the kernel's count alone: `wgpio stats` and /metrics
// showed none.
func TestDrops(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a4, a6 := netip.MustParseAddr("198.18.79.1"), netip.MustParseAddr("2001:2:0:79::1")
	ns := loopbackNS(t, "ksd", a4, a6)
	// The readers take one datagram each and then wait in deliver: the
	// sockets are not read while the test floods them.
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	s := New(slog.New(slog.DiscardHandler), ns.NsHandle(), 1, func(src, dst netip.AddrPort, msg []byte) { <-release })
	defer s.Close()
	const port = 41200
	if err := s.Listen(port, a4, a6); err != nil {
		t.Fatal(err)
	}
	if len(s.socks) != 2 {
		t.Fatalf("%d sockets, want 2", len(s.socks))
	}
	if n := s.Drops(); n != 0 {
		t.Fatalf("Drops() = %d before any datagram, want 0", n)
	}
	// A small buffer (the kernel's least: some 2 KiB, doubled), so that
	// a few datagrams fill it.
	for _, c := range s.socks {
		if err := c.SetReadBuffer(1024); err != nil {
			t.Fatal(err)
		}
	}
	const sent = 200
	if err := ns.Do(func() error {
		for _, a := range []netip.Addr{a4, a6} {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
			if err != nil {
				return err
			}
			msg := make([]byte, 1000)
			for range sent {
				if _, err := c.Write(msg); err != nil {
					c.Close()
					return err
				}
			}
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// kernel is the drops column of the Set's sockets in /proc/net/udp
	// and udp6 of the namespace (the port in hex, column 4 of the local
	// address; drops last).
	kernel := func() (n uint64) {
		t.Helper()
		for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
			out, err := ns.Run("cat", f)
			if err != nil {
				t.Fatalf("cat %s: %v\n%s", f, err, out)
			}
			for _, line := range strings.Split(string(out), "\n")[1:] {
				fs := strings.Fields(line)
				if len(fs) < 13 || !strings.HasSuffix(fs[1], ":A0F0") { // 41200
					continue
				}
				d, err := strconv.ParseUint(fs[len(fs)-1], 10, 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", f, line, err)
				}
				n += d
			}
		}
		return n
	}
	k := kernel()
	t.Logf("kernel: %d of %d datagrams dropped at the sockets", k, 2*sent)
	if k == 0 {
		t.Fatalf("the kernel dropped none of %d datagrams to each of 2 sockets: the test's buffers are not small", sent)
	}
	if n := s.Drops(); n != k {
		t.Errorf("Drops() = %d, want the kernel's count at the sockets, %d", n, k)
	}
	// An address gone: its socket's drops stay counted; at Close, all.
	s.Sync(a4)
	if n := s.Drops(); n != k {
		t.Errorf("after Sync closed the IPv6 socket: Drops() = %d, want %d", n, k)
	}
	once.Do(func() { close(release) })
	s.Close()
	if n := s.Drops(); n != k {
		t.Errorf("after Close: Drops() = %d, want %d", n, k)
	}
}

// TestListenPortInUse: at start, a listen port that another socket of the
// host holds (a wg0 or wireguard-go still up, bound to the wildcard
// address) is refused with EADDRINUSE, naming the port and how to find
// its holder, and nothing stays open; other addresses' ports free. Before,
// Listen logged that the port's fragments were lost and the gateway came
// up, its XDP program taking the other socket's datagrams unseen, where
// Linux's WireGuard refuses to come up ("Address already in use").
func TestListenPortInUse(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a4, a6 := netip.MustParseAddr("198.18.80.1"), netip.MustParseAddr("2001:2:0:80::1")
	ns := loopbackNS(t, "ksu", a4, a6)
	var held *net.UDPConn
	if err := ns.Do(func() (err error) {
		held, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 41300}) // 0.0.0.0, as wg0's socket
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var logged logBuf
	s := New(slog.New(slog.NewTextHandler(&logged, nil)), ns.NsHandle(), 1, func(src, dst netip.AddrPort, msg []byte) {})
	defer s.Close()
	err := s.Listen(41300, a4, a6)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "UDP port 41300") || !strings.Contains(err.Error(), "ss -uanp") {
		t.Errorf("Listen on a port held = %v, want EADDRINUSE naming port 41300 and ss", err)
	}
	if len(s.socks) != 0 {
		t.Errorf("%d sockets open after a refused Listen, want 0", len(s.socks))
	}
	if l := logged.take(); strings.Contains(l, "fragmented WireGuard packets") {
		t.Errorf("a refused Listen logged lost fragments:\n%s", l)
	}
	// The port free: taken.
	held.Close()
	if err := s.Listen(41300, a4, a6); err != nil || len(s.socks) != 2 {
		t.Errorf("Listen on a free port = %v with %d sockets, want nil and 2", err, len(s.socks))
	}
}

// TestDropsWrap: a socket's kernel drop count is 32 bits and wraps;
// Drops goes on past it, and keeps a closed socket's count whole. Before,
// Drops was the sum of the kernel's counts: at a socket's 2^32nd drop it
// went back by 2^32 (wgpio_drops_total fell, which Prometheus reads as a
// counter reset).
func TestDropsWrap(t *testing.T) {
	c1, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	kernel := map[*net.UDPConn]uint32{}
	defer func(r func(*net.UDPConn) (uint32, bool)) { readDrops = r }(readDrops)
	readDrops = func(c *net.UDPConn) (uint32, bool) { v, ok := kernel[c]; return v, ok }
	s := &Set{socks: []*net.UDPConn{c1, c2}}
	var want uint64
	for _, step := range []struct{ d1, d2 uint32 }{{0xfffffff0, 5}, {0x20, 5}, {0, 0}, {0xffffffff, 3}, {0x100, 0}} {
		kernel[c1] += step.d1
		kernel[c2] += step.d2
		want += uint64(step.d1) + uint64(step.d2)
		if n := s.Drops(); n != want {
			t.Fatalf("Drops() = %#x, want %#x (kernel counts %#x, %#x)", n, want, kernel[c1], kernel[c2])
		}
	}
	// A closed socket: the count read at its close stays; one that
	// cannot be read any more changes nothing.
	kernel[c1] += 7
	want += 7
	s.mu.Lock()
	s.closeSock(c1)
	s.socks = s.socks[1:]
	s.mu.Unlock()
	delete(kernel, c2)
	if n := s.Drops(); n != want {
		t.Errorf("after a close: Drops() = %#x, want %#x", n, want)
	}
	c2.Close()
}

// TestMoveWithinRange: with several ports (SourcePorts), a listen port
// moved by fewer than their number (41300-41303 to 41302-41305) is not
// refused as in use: the sockets on the ports of both ranges are the
// Set's own and stay open, the others open, the old ones close at Commit;
// a move aborted leaves the Set's sockets as they were. Before, Open
// bound the shared ports again and failed with EADDRINUSE, and `wg set
// NAME listen-port` refused the move.
func TestMoveWithinRange(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a4 := netip.MustParseAddr("198.18.81.1")
	ns := loopbackNS(t, "ksr", a4, netip.MustParseAddr("2001:2:0:81::1"))
	s := New(slog.New(slog.DiscardHandler), ns.NsHandle(), 4, func(src, dst netip.AddrPort, msg []byte) {})
	defer s.Close()
	if err := s.Listen(41300, a4); err != nil {
		t.Fatal(err)
	}
	ports := func() []uint16 {
		var ps []uint16
		for _, c := range s.socks {
			ps = append(ps, uint16(c.LocalAddr().(*net.UDPAddr).Port))
		}
		slices.Sort(ps)
		return ps
	}
	free := func(port uint16) bool {
		var c *net.UDPConn
		if ns.Do(func() (err error) {
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a4, port)))
			return err
		}) != nil {
			return false
		}
		c.Close()
		return true
	}
	p, err := s.Open(41301, a4)
	if err != nil {
		p.Abort() // its readers: Close waits for them
		t.Fatalf("Open(41301) over the Set's 41300-41303: %v", err)
	}
	p.Abort()
	if got := ports(); !slices.Equal(got, []uint16{41300, 41301, 41302, 41303}) || free(41301) || !free(41304) {
		t.Fatalf("after an aborted move: ports %v, 41301 free %v, 41304 free %v; want 41300-41303 held", got, free(41301), free(41304))
	}
	p, err = s.Open(41302, a4)
	if err != nil {
		p.Abort() // its readers: Close waits for them
		t.Fatalf("Open(41302) over the Set's 41300-41303: %v", err)
	}
	p.Commit()
	if got := ports(); !slices.Equal(got, []uint16{41302, 41303, 41304, 41305}) || !free(41300) || !free(41301) || free(41303) {
		t.Errorf("after the move: ports %v, 41300 free %v, 41303 free %v; want 41302-41305, the old ones free", got, free(41300), free(41303))
	}
}

// TestListenPortInUseEphemeral: a port of a range (SourcePorts > 1) held
// by another socket, inside the kernel's ephemeral ports, is refused with
// how to keep the range from other programs' outgoing sockets (reserve it:
// net.ipv4.ip_local_reserved_ports); outside them, without.
func TestListenPortInUseEphemeral(t *testing.T) {
	testenv.Short(t, "builds a namespace")
	a4 := netip.MustParseAddr("198.18.82.1")
	ns := loopbackNS(t, "kse", a4, netip.MustParseAddr("2001:2:0:82::1"))
	for _, c := range []struct {
		ephemeral string
		hint      bool
	}{{"41000 41999", true}, {"50000 50999", false}} {
		var held *net.UDPConn
		if err := ns.Do(func() (err error) {
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte(c.ephemeral), 0); err != nil {
				return err
			}
			held, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 41302})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s := New(slog.New(slog.DiscardHandler), ns.NsHandle(), 4, func(src, dst netip.AddrPort, msg []byte) {})
		err := s.Listen(41300, a4)
		s.Close()
		held.Close()
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("ephemeral ports %s: Listen on a range with a port held = %v, want EADDRINUSE", c.ephemeral, err)
		}
		if got := strings.Contains(err.Error(), "net.ipv4.ip_local_reserved_ports=41300-41303"); got != c.hint {
			t.Errorf("ephemeral ports %s: error %q; want the hint to reserve 41300-41303: %v", c.ephemeral, err, c.hint)
		}
	}
}
