//go:build linux

package kernelsock

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"

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
// full, counted in its UDP RcvbufErrors).
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
// goroutine. Its methods are not safe for concurrent use: the caller holds
// its WAN lock around them (the one that guards the addresses and the
// listen port). Deliver runs without that lock and must not take it.
type Set struct {
	log     *slog.Logger
	ns      netns.NsHandle
	ports   uint16
	deliver Deliver

	port   uint16
	socks  []*net.UDPConn
	closed bool // Close ran: Open opens nothing more
	wg     sync.WaitGroup
}

// New returns an empty Set whose sockets take ports ports from the listen
// port up (1 or more: fast-path mode's SourcePorts), opened in the network
// namespace ns (threadns.Do: netns.None for the caller's), their
// datagrams handed to deliver. Opening failures are logged to log.
func New(log *slog.Logger, ns netns.NsHandle, ports uint16, deliver Deliver) *Set {
	return &Set{log: log, ns: ns, ports: max(ports, 1), deliver: deliver}
}

// Pending are sockets Open opened, with their readers running, not yet the
// Set's: Commit makes them the Set's, Abort closes them. failed are the
// address and port of each socket Open could not open, with why: logged
// when the Set goes on without them (Commit, Sync), not when the caller
// refuses the port (Abort), whose old sockets stay.
type Pending struct {
	s      *Set
	port   uint16
	socks  []*net.UDPConn
	failed []failure
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
// outlives the gateway's Close by one update leaks nothing).
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
				c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
				if err != nil {
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
// closing the sockets the Set had (a listen port moved), and logs those
// Open could not open.
func (p *Pending) Commit() {
	p.logFailed()
	for _, c := range p.s.socks {
		c.Close()
	}
	p.s.socks, p.s.port = p.socks, p.port
	p.socks = nil
}

// Abort closes p's sockets; those Open could not open are not logged (the
// caller reports why it refused the port).
func (p *Pending) Abort() {
	p.failed = nil
	for _, c := range p.socks {
		c.Close()
	}
	p.socks = nil
}

// Listen opens the sockets of addrs at port (Open; failures logged and
// left out) and makes them the Set's, at start.
func (s *Set) Listen(port uint16, addrs ...netip.Addr) {
	p, _ := s.Open(port, addrs...)
	p.Commit()
}

// Sync makes the sockets match addrs, the WAN addresses of now, at the
// listen port: the sockets of addresses gone are closed, the addresses new
// get theirs (failures logged), and those of addresses kept stay open (a
// socket opened again beside the old one would find its address and port
// in use).
func (s *Set) Sync(addrs ...netip.Addr) {
	var kept []*net.UDPConn
	have := map[netip.Addr]bool{}
	for _, c := range s.socks {
		a := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		if slices.Contains(addrs, a) {
			kept = append(kept, c)
			have[a] = true
			continue
		}
		c.Close()
	}
	var add []netip.Addr
	for _, a := range addrs {
		if !have[a] {
			add = append(add, a)
		}
	}
	s.socks = kept
	p, _ := s.Open(s.port, add...)
	p.logFailed()
	s.socks = append(s.socks, p.socks...)
}

// Close closes the Set's sockets and waits for every reader the Set
// started, those of sockets closed before included. Pending sockets not
// committed must be aborted first. Safe to call more than once.
func (s *Set) Close() {
	s.closed = true
	for _, c := range s.socks {
		c.Close()
	}
	s.socks = nil
	s.wg.Wait()
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
