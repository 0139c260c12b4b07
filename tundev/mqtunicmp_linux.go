package tundev

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// AnswerNoRoute makes Read answer each packet it drops as TUNDropNoRoute
// (SetAllowed) with ICMP host unreachable (type 3 code 1, RFC 792, RFC
// 1812 §5.2.7.1) or ICMPv6 address unreachable (type 1 code 3, RFC 4443
// §3.1), as Linux's wg0 answers a packet no peer's allowed IPs hold
// (wg_xmit, -ENOKEY, through icmp_ndo_send): the kernel routed the packet
// of a LAN host (or the host's own) into the TUN, and the answer goes
// back to its source.
//
// An error written into the TUN from a local address would be dropped by
// the kernel as a martian, so the answer leaves through the host's stack:
// one raw ICMP socket and one raw ICMPv6 socket per MultiQueueTUN, opened
// here in the calling thread's network namespace (the TUN's: call it
// where OpenMultiQueueTUN was called). Unbound, they let the kernel choose
// the source address by its routes toward the packet's source, as
// __icmp_send and icmp6_send do with no local destination; the IPv4
// socket sends with TOS 0xc0 (IPTOS_PREC_INTERNETCONTROL) and without DF,
// as the kernel's own ICMP socket; the kernel computes the ICMPv6
// checksum (RFC 3542 §3.1). Both filter out every ICMP message they would
// receive (ICMP_FILTER, ICMPV6_FILTER), so they queue nothing.
//
// The answers spend a limiter of their own, rate (ICMPRate; its zero
// value: Linux's defaults), per destination with an IPv6 interval
// shortened as for a /64 route back (internal/icmprate.Shift6; the kernel's route
// is not looked up per packet), and none is sent where RFC 1812 §4.3.2.7
// / RFC 4443 §2.4(e) forbid it. Read never waits for them: each is one
// non-blocking sendto(2) from Read's goroutine, allocating nothing;
// TUNStats counts those sent (ICMPErrors), held back by the limiter
// (ICMPSuppressed) and refused by the kernel (ICMPSendErrors).
//
// A family whose socket the kernel does not support (IPv6 disabled:
// EAFNOSUPPORT) is not answered; any other failure (EPERM: CAP_NET_RAW is
// needed) is returned and nothing is answered. Call it once, before the
// first Read; a second call returns an error, and so does a call after
// Close (os.ErrClosed).
func (t *MultiQueueTUN) AnswerNoRoute(rate ICMPRate) error {
	h := &hostICMP{fd4: -1, fd6: -1, limit: icmprate.New(rate), epoch: time.Now(), buf: make([]byte, header.ICMPv6ErrorMaxLen)}
	var err error
	if h.fd4, err = openRawICMP(unix.AF_INET); err == nil {
		h.fd6, err = openRawICMP(unix.AF_INET6)
	}
	if err != nil {
		h.close()
		return fmt.Errorf("tundev: answer no_route on %s: %w", t.name, err)
	}
	if !t.icmp.CompareAndSwap(nil, h) {
		h.close()
		return fmt.Errorf("tundev: answer no_route on %s: already set", t.name)
	}
	select {
	case <-t.closed:
		// Close may have looked for the sockets before they were
		// published: close them here (closing twice is harmless).
		h.close()
		return fmt.Errorf("tundev: answer no_route on %s: %w", t.name, os.ErrClosed)
	default:
	}
	return nil
}

// openRawICMP opens family's raw ICMP socket for AnswerNoRoute, or returns
// -1 and no error when the kernel does not support the family.
func openRawICMP(family int) (int, error) {
	proto := unix.IPPROTO_ICMP
	if family == unix.AF_INET6 {
		proto = unix.IPPROTO_ICMPV6
	}
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return -1, nil
	}
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if family == unix.AF_INET {
		// linux/icmp.h ICMP_FILTER: a set bit filters that type out.
		const icmpFilter = 1
		err = unix.SetsockoptInt(fd, unix.SOL_RAW, icmpFilter, -1)
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TOS, 0xc0)
		}
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT)
		}
	} else {
		var f unix.ICMPv6Filter
		for i := range f.Data {
			f.Data[i] = ^uint32(0) // ICMP6_FILTER_SETBLOCKALL
		}
		err = unix.SetsockoptICMPv6Filter(fd, unix.IPPROTO_ICMPV6, unix.ICMPV6_FILTER, &f)
	}
	if err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("setsockopt", err)
	}
	return fd, nil
}

// hostICMP is AnswerNoRoute's state. buf and the socket addresses are
// Read's goroutine's; mu guards the fds, set before it is published and
// closed (-1) by Close, which a Read still running may race: Read holds
// mu for each sendto (a rare path, and Read's alone until Close).
type hostICMP struct {
	mu       sync.Mutex
	fd4, fd6 int // -1: that family is not answered
	limit    *icmprate.Limiter
	epoch    time.Time
	buf      []byte // header.ICMPv6ErrorMaxLen bytes
	to4      unix.RawSockaddrInet4
	to6      unix.RawSockaddrInet6
}

// close closes the sockets; the next answers are not sent.
func (h *hostICMP) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fd := range [2]int{h.fd4, h.fd6} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	h.fd4, h.fd6 = -1, -1
}

// unreachable answers pkt, an IP packet read from the TUN (its IP header
// within pkt: notAllowed checked) that Read drops as no_route, counting
// the outcome in c.
func (h *hostICMP) unreachable(pkt []byte, c *tunCounters) {
	v4 := pkt[0]>>4 == header.IPv4Version
	var dst netip.Addr
	var shift uint
	switch {
	case v4 && h.fd4 >= 0:
		if header.ICMPv4ErrorAllowed(pkt) != header.OK {
			return
		}
		dst = netip.AddrFrom4(header.IPv4(pkt).SrcBytes())
	case !v4 && h.fd6 >= 0:
		if header.ICMPv6ErrorAllowedCode(pkt, header.ICMPv6TypeDestUnreachable, header.ICMPv6CodeAddrUnreachable) != header.OK {
			return
		}
		dst = netip.AddrFrom16(header.IPv6(pkt).SrcBytes())
		shift = icmprate.Shift6(64)
	default:
		return
	}
	if !h.limit.AllowShift(dst, int64(time.Since(h.epoch)), shift) {
		c.icmpSuppressed.Add(1)
		return
	}
	// The Put functions write the IP header too, from an unspecified
	// source; the raw socket sends only the ICMP message after it.
	var n, l3 int
	var r header.Reason
	if v4 {
		n, r = header.PutICMPv4HostUnreachable(h.buf, [4]byte{}, pkt)
		l3 = header.IPv4MinLen
	} else {
		n, r = header.PutICMPv6AddrUnreachable(h.buf, [16]byte{}, pkt)
		l3 = header.IPv6Len
	}
	if r != header.OK {
		return
	}
	msg := h.buf[l3:n]
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error = unix.EBADF
	switch {
	case h.fd4 < 0 && v4, h.fd6 < 0 && !v4:
		// closed since the check above
	case v4:
		h.to4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.As4()}
		err = sendto(h.fd4, msg, unsafe.Pointer(&h.to4), unix.SizeofSockaddrInet4)
	default:
		msg[2], msg[3] = 0, 0 // the kernel's to compute
		h.to6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.As16()}
		err = sendto(h.fd6, msg, unsafe.Pointer(&h.to6), unix.SizeofSockaddrInet6)
	}
	if err != nil {
		c.icmpSendErrors.Add(1)
		return
	}
	c.icmp.Add(1)
}

// sendto is sendto(2) of b to the socket address at to (size bytes), never
// waiting (MSG_DONTWAIT), without the allocation of unix.Sendto's
// Sockaddr.
func sendto(fd int, b []byte, to unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, uintptr(to), size)
	if errno != 0 {
		return errno
	}
	return nil
}
