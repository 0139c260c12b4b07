//go:build linux

package kernelsock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/threadns"
)

// Deliver takes one datagram a socket received: its source (IPv4-mapped
// addresses unmapped), the socket's address and port it was sent to, and
// its UDP payload, valid only during the call (the reader's buffer). It is
// called from the socket's reader goroutine, one call at a time per
// socket, and must not block for long: the socket's datagrams wait
// meanwhile (the kernel drops them once the socket's receive buffer is
// full, counted in its UDP RcvbufErrors and in Set.Drops).
type Deliver func(src, dst netip.AddrPort, msg []byte)

// maxDatagram is the reader's buffer: the longest UDP payload over IPv4
// (65,535 − 20 − 8) fits, and IPv6's without a jumbogram.
const maxDatagram = 65535

// RcvBuf is the receive buffer, in bytes, asked for each socket
// (SO_RCVBUFFORCE, which takes CAP_NET_ADMIN, as a gateway has; without
// it SO_RCVBUF, which the kernel caps at net.core.rmem_max). A
// reassembled datagram is charged the buffers of all its fragments
// (several KiB for a 1,500-byte one cut in two), so the kernel's default
// (net.core.rmem_default, 208 KiB) holds only some tens of them: with a
// peer whose path MTU made it fragment every packet, 16-18% of an iperf3
// stream was lost there whenever the reader lagged (counted only as the
// kernel's Udp6RcvbufErrors), none with 8 MiB. The memory is taken only
// while datagrams wait.
const RcvBuf = 8 << 20

// Set is a gateway's kernel sockets: one on each WAN address and each port
// of a range of ports starting at the listen port, each with a reader
// goroutine. Its methods but Drops are not safe for concurrent use: the
// caller holds its WAN lock around them (the one that guards the
// addresses and the listen port). Deliver runs without that lock and must
// not take it.
type Set struct {
	log     *slog.Logger
	ns      netns.NsHandle
	ports   uint16
	deliver Deliver

	port   uint16
	closed bool // Close ran: Open opens nothing more
	wg     sync.WaitGroup

	// mu guards socks and gone against Drops (the methods that change
	// them run under the caller's lock besides).
	mu    sync.Mutex
	socks []*net.UDPConn
	gone  uint64 // drops of the sockets closed (Drops)
	// counts is each socket's drops as Drops last read them (its 32-bit
	// kernel count, and that count unwrapped), by socket.
	counts map[*net.UDPConn]*dropCount
}

// dropCount is one socket's drops: the kernel's 32-bit count as last read
// (last), and the count since the socket opened (total), which goes on
// past 2^32 where the kernel's wraps.
type dropCount struct {
	last  uint32
	total uint64
}

// New returns an empty Set whose sockets take ports ports from the listen
// port up (1 or more: fast-path mode's SourcePorts), opened in the network
// namespace ns (threadns.Do: netns.None for the caller's), their
// datagrams handed to deliver. Opening failures are logged to log.
func New(log *slog.Logger, ns netns.NsHandle, ports uint16, deliver Deliver) *Set {
	return &Set{log: log, ns: ns, ports: max(ports, 1), deliver: deliver}
}

// Pending are sockets Open opened, with their readers running, not yet the
// Set's: Commit makes them the Set's, Abort closes them. kept are the
// Set's sockets on an address and port of the new range (a listen port
// moved by fewer than the Set's ports), which stay open either way. failed are the
// address and port of each socket Open could not open, with why: logged
// when the Set goes on without them (Commit, Sync), not when the caller
// refuses the port (Abort), whose old sockets stay.
type Pending struct {
	s      *Set
	port   uint16
	socks  []*net.UDPConn
	kept   []*net.UDPConn
	failed []failure
	// ephemeral is the namespace's ephemeral port range (its
	// ip_local_port_range), read when a port was in use; 0, 0 if not.
	ephemeral [2]uint16
}

// failure is a socket Open could not open.
type failure struct {
	ap  netip.AddrPort
	err error
}

// logFailed logs the sockets p lacks, once: their ports' fragments are lost.
func (p *Pending) logFailed() {
	for _, f := range p.failed {
		p.s.log.Warn("no socket for datagrams the kernel reassembles: fragmented WireGuard packets to this port are lost",
			"addr", f.ap.Addr(), "port", f.ap.Port(), "err", f.err)
	}
	p.failed = nil
}

// Open opens a socket on each of addrs (invalid ones skipped) and each
// port from port up, and starts their readers. A socket that cannot be
// opened is left out (its port's fragments are then lost, counted by the
// kernel's UDP counters only), and logged by Commit, not by Abort (a
// refused move keeps the old port's sockets: a warning that this port's
// fragments are lost was false there); err is the first such
// failure, so that a caller moving the listen port can refuse a port the
// host already uses (EADDRINUSE, test with errors.Is), as wireguard-go
// refuses it. The sockets are opened in the Set's namespace. After Close
// it opens nothing and returns net.ErrClosed (an address follower that
// outlives the gateway's Close by one update leaks nothing). An address
// and port the Set has a socket on already is not opened again (it would
// be EADDRINUSE, our own socket holding it): the Pending keeps that
// socket, so that a listen port moved by less than the Set's range of
// ports (SourcePorts > 1: 51820 to 51822 with 4) is not refused.
func (s *Set) Open(port uint16, addrs ...netip.Addr) (*Pending, error) {
	p := &Pending{s: s, port: port}
	if s.closed {
		return p, net.ErrClosed
	}
	var first error
	nerr := threadns.Do(s.ns, func() error {
		for _, a := range addrs {
			if !a.IsValid() {
				continue
			}
			network := "udp4"
			if a.Is6() {
				network = "udp6"
			}
			for i := range s.ports {
				ap := netip.AddrPortFrom(a, port+i)
				if c := s.holding(ap); c != nil {
					p.kept = append(p.kept, c)
					continue
				}
				c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
				if err != nil {
					if errors.Is(err, unix.EADDRINUSE) && p.ephemeral[1] == 0 {
						p.ephemeral = ephemeralPorts()
					}
					p.failed = append(p.failed, failure{ap, err})
					if first == nil {
						first = err
					}
					continue
				}
				setRcvBuf(c)
				p.socks = append(p.socks, c)
				s.wg.Add(1)
				go s.read(c, ap)
			}
		}
		return nil
	})
	if nerr != nil {
		s.log.Warn("no sockets for datagrams the kernel reassembles: fragmented WireGuard packets are lost", "addrs", addrs, "port", port, "err", nerr)
		return p, nerr
	}
	return p, first
}

// Commit makes p's sockets the Set's and its port the listen port,
// closing the sockets the Set had but those p kept (a listen port moved),
// and logs those Open could not open.
func (p *Pending) Commit() {
	p.logFailed()
	s := p.s
	s.mu.Lock()
	for _, c := range s.socks {
		if !slices.Contains(p.kept, c) {
			s.closeSock(c)
		}
	}
	s.socks, s.port = append(p.kept, p.socks...), p.port
	s.mu.Unlock()
	p.socks, p.kept = nil, nil
}

// Abort closes p's sockets but those it kept of the Set's, which stay the
// Set's; those Open could not open are not logged (the caller reports why
// it refused the port).
func (p *Pending) Abort() {
	p.failed, p.kept = nil, nil
	p.s.mu.Lock()
	for _, c := range p.socks {
		p.s.closeSock(c)
	}
	p.s.mu.Unlock()
	p.socks = nil
}

// Listen opens the sockets of addrs at port (Open) and makes them the
// Set's, at start. A port that another socket of the host holds on one of
// addrs (EADDRINUSE: a kernel wg0 or a wireguard-go still up on it, its
// socket bound to the wildcard address) is refused: Listen keeps nothing
// open and returns an error that wraps EADDRINUSE, names the port and
// says how to find the holder, as Linux's WireGuard refuses to come up on
// a port in use and as a move of the listen port is refused (the caller's
// moveListenPort). Started anyway, the gateway's XDP program took that
// socket's datagrams from it unseen, and the port's fragments were lost.
// Other failures (an address still tentative) are logged and left out.
func (s *Set) Listen(port uint16, addrs ...netip.Addr) error {
	p, _ := s.Open(port, addrs...)
	if err := p.inUse(); err != nil {
		p.Abort()
		return err
	}
	p.Commit()
	return nil
}

// Refusal returns the error of a move of the listen port to port that
// Open failed with err (its first failure), when the port is to be
// refused, nil when the move goes on (no failure, or an address still
// tentative, logged by Commit): another socket of the host holds the port
// (EADDRINUSE), as wireguard-go's sockets are refused, or this process
// may not bind it (EACCES: a port below net.ipv4.ip_unprivileged_port_start
// without CAP_NET_BIND_SERVICE), where the gateway came up on the port and
// lost every fragmented datagram to it. The error wraps err (a UAPI set
// answers with its errno).
func Refusal(port uint16, err error) error {
	switch {
	case errors.Is(err, unix.EADDRINUSE):
		return fmt.Errorf("listen port %d: %w", port, err)
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("listen port %d: %w (%s)", port, err, privilegedHint)
	}
	return nil
}

// privilegedHint is what to do about a port this process may not bind.
const privilegedHint = "a port below net.ipv4.ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE, which this process lacks: grant it, or choose another port"

// inUse returns Listen's error for the first socket Open could not open
// because another socket of the host holds its port (EADDRINUSE) or this
// process may not bind it (EACCES), nil when none.
func (p *Pending) inUse() error {
	for _, f := range p.failed {
		if errors.Is(f.err, unix.EACCES) {
			return fmt.Errorf("%w (%s)", f.err, privilegedHint)
		}
		if errors.Is(f.err, unix.EADDRINUSE) {
			hint := ""
			if port := f.ap.Port(); p.s.ports > 1 && port >= p.ephemeral[0] && port <= p.ephemeral[1] {
				// Any program's outgoing socket may be given it.
				hint = fmt.Sprintf("; it is among the kernel's ephemeral ports (%d-%d), which any program's outgoing socket may be given: reserve the gateway's range with sysctl -w net.ipv4.ip_local_reserved_ports=%d-%d",
					p.ephemeral[0], p.ephemeral[1], p.port, int(p.port)+int(p.s.ports)-1)
			}
			return fmt.Errorf("%w; another socket of this host holds UDP port %d (`ss -uanp 'sport = :%d'` names its process: a wg0 or wireguard-go still up on it?), and it would receive none of its datagrams once the gateway's XDP program takes them: stop it, or choose another port%s",
				f.err, f.ap.Port(), f.ap.Port(), hint)
		}
	}
	return nil
}

// ephemeralPorts reads the calling thread's network namespace's ephemeral
// port range (net.ipv4.ip_local_port_range, which IPv6 shares); 0, 0 when
// it cannot be read.
func ephemeralPorts() [2]uint16 {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return [2]uint16{}
	}
	var lo, hi uint16
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo > hi {
		return [2]uint16{}
	}
	return [2]uint16{lo, hi}
}

// Probe opens the sockets a Set of ports ports would open at port on addrs
// in the namespace ns, closes them at once, and returns Listen's error
// when another socket of the host holds one of those ports (EADDRINUSE),
// else nil (other failures are left to Listen, which logs them). A start
// calls it before it attaches its XDP program: refused only at Listen,
// after the attach, the program had taken the holder's datagrams from it
// for the whole start (and an attach makes some NICs reset their rings),
// at every retry of a unit that restarts on failure.
func Probe(ns netns.NsHandle, port, ports uint16, addrs ...netip.Addr) error {
	s := New(slog.New(slog.DiscardHandler), ns, ports, func(src, dst netip.AddrPort, msg []byte) {})
	p, _ := s.Open(port, addrs...)
	err := p.inUse()
	p.Abort()
	s.Close()
	return err
}

// holding returns the Set's socket on ap, nil when it has none. Under the
// caller's lock (socks changes only there).
func (s *Set) holding(ap netip.AddrPort) *net.UDPConn {
	for _, c := range s.socks {
		l := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if l.Addr().Unmap() == ap.Addr().Unmap() && l.Port() == ap.Port() {
			return c
		}
	}
	return nil
}

// Sync makes the sockets match addrs, the WAN addresses of now, at the
// listen port: the sockets of addresses gone are closed, the addresses new
// get theirs (failures logged), and those of addresses kept stay open (a
// socket opened again beside the old one would find its address and port
// in use).
func (s *Set) Sync(addrs ...netip.Addr) {
	var kept []*net.UDPConn
	have := map[netip.Addr]bool{}
	s.mu.Lock()
	for _, c := range s.socks {
		a := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		if slices.Contains(addrs, a) {
			kept = append(kept, c)
			have[a] = true
			continue
		}
		s.closeSock(c)
	}
	s.socks = kept
	s.mu.Unlock()
	var add []netip.Addr
	for _, a := range addrs {
		if !have[a] {
			add = append(add, a)
		}
	}
	p, _ := s.Open(s.port, add...)
	p.logFailed()
	s.mu.Lock()
	s.socks = append(s.socks, p.socks...)
	s.mu.Unlock()
}

// Close closes the Set's sockets and waits for every reader the Set
// started, those of sockets closed before included. Pending sockets not
// committed must be aborted first. Safe to call more than once.
func (s *Set) Close() {
	s.closed = true
	s.mu.Lock()
	for _, c := range s.socks {
		s.closeSock(c)
	}
	s.socks = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// Drops is the number of datagrams the kernel dropped at the Set's
// sockets since New, those it has closed included: chiefly datagrams
// that found a socket's receive buffer (RcvBuf) full while its reader
// lagged, which the kernel also counts in its UdpRcvbufErrors or
// Udp6RcvbufErrors; the few it drops there for another cause (a UDP
// checksum that fails, memory accounting) are in the count too. It is
// each socket's own drop count (SO_MEMINFO's SK_MEMINFO_DROPS, the
// drops column of /proc/net/udp and /proc/net/udp6, `ss -uam`'s d),
// read by one getsockopt per socket: nothing is counted per datagram.
// A socket's count is 32 bits in the kernel and wraps after 2^32 drops;
// Drops adds up the change since its last read, so that it never goes
// back, provided it is read at least once per 2^32 drops of a socket
// (at a million drops a second, every 71 minutes: stats and /metrics
// read it far more often). Before, the sum of the kernel's counts went
// back by 2^32 at a wrap, which a Prometheus rate() reads as a reset.
// Pending sockets are not counted until Commit (Abort adds theirs).
// Safe for concurrent use with the other methods.
func (s *Set) Drops() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.gone
	for _, c := range s.socks {
		n += s.countLocked(c).total
	}
	return n
}

// readDrops reads a socket's drop count (sockDrops); a variable for the
// tests.
var readDrops = sockDrops

// countLocked reads c's drop count into s.counts and returns it. s.mu
// held.
func (s *Set) countLocked(c *net.UDPConn) *dropCount {
	if s.counts == nil {
		s.counts = make(map[*net.UDPConn]*dropCount)
	}
	d := s.counts[c]
	if d == nil {
		d = new(dropCount)
		s.counts[c] = d
	}
	if v, ok := readDrops(c); ok {
		d.total += uint64(v - d.last) // modulo 2^32: a wrap since the last read
		d.last = v
	}
	return d
}

// closeSock closes c, adding its drops to s.gone first. s.mu held.
func (s *Set) closeSock(c *net.UDPConn) {
	s.gone += s.countLocked(c).total
	delete(s.counts, c)
	c.Close()
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of the socket's drop
// count in SO_MEMINFO's array of 32-bit counters (linux/sock_diag.h);
// skMeminfoVars is that array's length (SK_MEMINFO_VARS).
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// sockDrops is the kernel's count of the datagrams it dropped at c
// (SK_MEMINFO_DROPS, 32 bits); ok is false when it cannot be read (c
// closed).
func sockDrops(c *net.UDPConn) (drops uint32, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var mem [skMeminfoVars]uint32
	l := uint32(unsafe.Sizeof(mem))
	var errno unix.Errno
	if rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mem)), uintptr(unsafe.Pointer(&l)), 0)
	}) != nil || errno != 0 || l < (skMeminfoDrops+1)*4 {
		return 0, false
	}
	return mem[skMeminfoDrops], true
}

// setRcvBuf gives c a receive buffer of RcvBuf bytes: forced where the
// process may (CAP_NET_ADMIN), else as large as net.core.rmem_max lets
// it be. A socket that gets neither keeps the kernel's default; it still
// works, so nothing is reported.
func setRcvBuf(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, RcvBuf) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, RcvBuf)
		}
	})
}

// read hands the datagrams of c (bound to dst) to deliver until c is
// closed.
func (s *Set) read(c *net.UDPConn, dst netip.AddrPort) {
	defer s.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("read reassembled datagrams", "addr", dst, "err", err)
			}
			return
		}
		s.deliver(netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), dst, buf[:n])
	}
}
