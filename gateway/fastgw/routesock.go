//go:build linux

package fastgw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// routeSocket is a NETLINK_ROUTE socket that installs and deletes the
// routes into the exception TUN many requests per sendmsg(2): one request
// a route, each answered by the kernel in turn (an ack, by sequence
// number), cost a round trip through the kernel per prefix (README,
// "Large configurations"); the route worker sends them, out of the
// control plane's lock (routeQueue). Each route gets
// its own result, as one request a route gave. Not safe for concurrent
// use (dataplane_.routeMu guards it).
type routeSocket struct {
	fd  int
	seq uint32
	// window is how many requests are in flight at most: their acks must
	// fit in the socket's receive buffer, else the kernel drops those past
	// it (ENOBUFS), and their routes' results are not known. Halved at
	// each ENOBUFS.
	window int
	out    []byte
	in     []byte
	writes int // sendmsg calls made, for tests
}

// routeWindow is routeSocket's first window: 256 acks take about 200 KiB
// of the receive buffer (an ack is a small message, but the kernel counts
// each at its buffer's size, ~768 bytes), which openRouteSocket raises to
// 1 MiB where it may (CAP_NET_ADMIN).
const routeWindow = 256

// routeAckTimeout is how long a batch waits for the kernel's acks (the
// routing table's lock may be held by another's large change) before its
// unanswered routes fail.
const routeAckTimeout = 30 // seconds

// openRouteSocket opens a routeSocket in the calling thread's network
// namespace.
func openRouteSocket() (*routeSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: bind: %w", err)
	}
	// Acks without a copy of the request: smaller in the buffer. (A
	// kernel before 4.3 lacks the option: the acks are larger, which the
	// window's halving on ENOBUFS follows.)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	}
	tv := unix.Timeval{Sec: routeAckTimeout}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: receive timeout: %w", err)
	}
	return &routeSocket{fd: fd, window: routeWindow, in: make([]byte, 64<<10)}, nil
}

// Close closes the socket.
func (s *routeSocket) Close() error { return unix.Close(s.fd) }

// routeOp is what a request does to the route of a prefix into the
// exception TUN.
type routeOp uint8

const (
	routeAdd     routeOp = iota // RTM_NEWROUTE, NLM_F_CREATE|NLM_F_EXCL: `ip route add`
	routeReplace                // RTM_NEWROUTE, NLM_F_CREATE|NLM_F_REPLACE: `ip route replace`
	routeDelete                 // RTM_DELROUTE: `ip route del PREFIX dev NAME`
)

// errNoAck is the result of a request whose ack did not come: lost to a
// full receive buffer (ENOBUFS), or not within routeAckTimeout.
var errNoAck = errors.New("netlink: no answer from the kernel")

// do runs op on the route of each of ps (none a default route) into the
// interface of index oif, in the main table, and returns each one's
// result in errs (len(ps)): nil, or the kernel's errno (EEXIST, ENETDOWN,
// ESRCH...), or errNoAck. The routes are those netlink.Handle's RouteAdd,
// RouteReplace and RouteDel make of netlink.Route{LinkIndex: oif, Dst: p}:
// unicast, scope universe, protocol boot (delete: scope nowhere, any
// type and protocol), the kernel's default metric (IPv6 1024).
func (s *routeSocket) do(op routeOp, ps []netip.Prefix, oif int, errs []error) {
	for len(ps) > 0 {
		n := min(len(ps), s.window)
		if s.batch(op, ps[:n], oif, errs[:n]) && s.window > 8 {
			s.window /= 2
		}
		ps, errs = ps[n:], errs[n:]
	}
}

// batch sends one request per prefix of ps in one sendmsg and reads their
// acks; it reports whether an ack was lost to a full receive buffer.
func (s *routeSocket) batch(op routeOp, ps []netip.Prefix, oif int, errs []error) (overrun bool) {
	s.out = s.out[:0]
	first := s.seq + 1
	for _, p := range ps {
		s.seq++
		s.out = appendRouteMsg(s.out, op, p, oif, s.seq)
	}
	for i := range errs {
		errs[i] = errNoAck
	}
	s.writes++
	if err := unix.Sendto(s.fd, s.out, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("netlink: send: %w", err)
		}
		return false
	}
	pending := len(ps)
	for pending > 0 {
		n, _, err := unix.Recvfrom(s.fd, s.in, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ENOBUFS) {
			// Some acks were dropped; those queued before and after
			// may still be read, but which are lost is known only by
			// their absence: drain what is there, without waiting.
			overrun = true
			s.drain(first, errs, &pending)
			return overrun
		}
		if err != nil { // EAGAIN: the timeout
			return overrun
		}
		s.parse(s.in[:n], first, errs, &pending)
	}
	return overrun
}

// drain reads the acks queued on the socket without waiting.
func (s *routeSocket) drain(first uint32, errs []error, pending *int) {
	for *pending > 0 {
		n, _, err := unix.Recvfrom(s.fd, s.in, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
			continue
		}
		if err != nil {
			return
		}
		s.parse(s.in[:n], first, errs, pending)
	}
}

// parse matches the acks of b to the requests from sequence number first
// on; acks of other numbers (of an earlier batch, late) are ignored.
func (s *routeSocket) parse(b []byte, first uint32, errs []error, pending *int) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return
		}
		typ := binary.NativeEndian.Uint16(b[4:6])
		seq := binary.NativeEndian.Uint32(b[8:12])
		if i := int(seq - first); typ == unix.NLMSG_ERROR && l >= unix.SizeofNlMsghdr+4 && i >= 0 && i < len(errs) && errs[i] == errNoAck {
			if code := int32(binary.NativeEndian.Uint32(b[unix.SizeofNlMsghdr:])); code < 0 {
				errs[i] = unix.Errno(-code)
			} else {
				errs[i] = nil
			}
			*pending--
		}
		b = b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
	}
}

// appendRouteMsg appends the request of op on p's route into oif.
func appendRouteMsg(b []byte, op routeOp, p netip.Prefix, oif int, seq uint32) []byte {
	addr := p.Addr().AsSlice()
	dstLen := unix.SizeofRtAttr + len(addr) // 4-aligned: 4 or 16 bytes
	l := unix.SizeofNlMsghdr + unix.SizeofRtMsg + dstLen + unix.SizeofRtAttr + 4
	typ, flags := uint16(unix.RTM_NEWROUTE), uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE)
	rtm := unix.RtMsg{Dst_len: uint8(p.Bits()), Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST, Family: unix.AF_INET}
	if p.Addr().Is6() {
		rtm.Family = unix.AF_INET6
	}
	switch op {
	case routeAdd:
		flags |= unix.NLM_F_EXCL
	case routeReplace:
		flags |= unix.NLM_F_REPLACE
	case routeDelete:
		typ, flags = unix.RTM_DELROUTE, unix.NLM_F_REQUEST|unix.NLM_F_ACK
		rtm.Protocol, rtm.Scope, rtm.Type = 0, unix.RT_SCOPE_NOWHERE, 0
	}
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, uint32(l))
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0) // the kernel's port
	b = append(b, rtm.Family, rtm.Dst_len, rtm.Src_len, rtm.Tos, rtm.Table, rtm.Protocol, rtm.Scope, rtm.Type)
	b = ne.AppendUint32(b, rtm.Flags)
	b = ne.AppendUint16(b, uint16(dstLen))
	b = ne.AppendUint16(b, unix.RTA_DST)
	b = append(b, addr...)
	b = ne.AppendUint16(b, unix.SizeofRtAttr+4)
	b = ne.AppendUint16(b, unix.RTA_OIF)
	return ne.AppendUint32(b, uint32(oif))
}

// closeRouteSocket closes d.rs: the routes are installed one request
// each from now on (routeAll), through d.nl.
func (d *dataplane_) closeRouteSocket() {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	if d.rs != nil {
		d.rs.Close()
		d.rs = nil
	}
}
