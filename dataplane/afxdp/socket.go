//go:build linux

package afxdp

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socket is one AF_XDP socket bound to one (interface, queue) with its four
// mmap'd rings. With a shared UMEM the fill and completion rings are still
// this socket's own (Linux 5.10, XDP_SHARED_UMEM across queues and devices).
type socket struct {
	fd       int
	fill     *ring[uint64]
	comp     *ring[uint64]
	rx       *ring[unix.XDPDesc]
	tx       *ring[unix.XDPDesc]
	maps     [4][]byte // mmap'd ring memory: fill, comp, rx, tx
	txBudget int       // frames the kernel sends per sendto in copy mode
	// wakeup: bound with need_wakeup (the owner's choice on a shared
	// UMEM); without it the rings' flags are never set, and every
	// transmit in zero-copy mode kicks.
	wakeup bool
}

func setsockoptInt(fd, opt, v int) error {
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.SOL_XDP, opt, v))
}

func getsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return os.NewSyscallError("getsockopt", e)
	}
	return nil
}

// ringSizes are the entry counts of a socket's rings, powers of 2.
type ringSizes struct{ fill, comp, rx, tx int }

// newSocket creates an AF_XDP socket, registers mem as its UMEM when reg is
// true, and creates and maps its rings. It does not bind.
func newSocket(reg *unix.XDPUmemReg, sz ringSizes) (_ *socket, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, diagnose(fmt.Errorf("create AF_XDP socket: %w", os.NewSyscallError("socket", err)))
	}
	s := &socket{fd: fd, txBudget: copyModeTXBudget}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if reg != nil {
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
			uintptr(unsafe.Pointer(reg)), unsafe.Sizeof(*reg), 0)
		if e != 0 {
			return nil, diagnose(fmt.Errorf("register UMEM of %d bytes: %w", reg.Len, os.NewSyscallError("setsockopt XDP_UMEM_REG", e)))
		}
	}
	for _, o := range []struct{ opt, n int }{
		{unix.XDP_UMEM_FILL_RING, sz.fill}, {unix.XDP_UMEM_COMPLETION_RING, sz.comp},
		{unix.XDP_RX_RING, sz.rx}, {unix.XDP_TX_RING, sz.tx},
	} {
		if err := setsockoptInt(fd, o.opt, o.n); err != nil {
			return nil, fmt.Errorf("create ring (option %d, %d entries): %w", o.opt, o.n, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return nil, fmt.Errorf("get ring offsets: %w", err)
	}
	const addrSize, descSize = 8, uint64(unsafe.Sizeof(unix.XDPDesc{}))
	mapRing := func(i int, pgoff int64, o unix.XDPRingOffset, n int, entry uint64) error {
		m, err := unix.Mmap(fd, pgoff, int(o.Desc+uint64(n)*entry), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("map ring at %#x: %w", pgoff, os.NewSyscallError("mmap", err))
		}
		s.maps[i] = m
		return nil
	}
	if err := mapRing(0, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, sz.fill, addrSize); err != nil {
		return nil, err
	}
	if err := mapRing(1, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, sz.comp, addrSize); err != nil {
		return nil, err
	}
	if err := mapRing(2, unix.XDP_PGOFF_RX_RING, off.Rx, sz.rx, descSize); err != nil {
		return nil, err
	}
	if err := mapRing(3, unix.XDP_PGOFF_TX_RING, off.Tx, sz.tx, descSize); err != nil {
		return nil, err
	}
	s.fill = ringAt[uint64](s.maps[0], off.Fr.Producer, off.Fr.Consumer, off.Fr.Flags, off.Fr.Desc, uint32(sz.fill))
	s.comp = ringAt[uint64](s.maps[1], off.Cr.Producer, off.Cr.Consumer, off.Cr.Flags, off.Cr.Desc, uint32(sz.comp))
	s.rx = ringAt[unix.XDPDesc](s.maps[2], off.Rx.Producer, off.Rx.Consumer, off.Rx.Flags, off.Rx.Desc, uint32(sz.rx))
	s.tx = ringAt[unix.XDPDesc](s.maps[3], off.Tx.Producer, off.Tx.Consumer, off.Tx.Flags, off.Tx.Desc, uint32(sz.tx))
	// Let one sendto send a whole TX ring in copy mode (Linux 6.17); older
	// kernels keep 32 and Transmit kicks repeatedly.
	if setsockoptInt(fd, unix.XDP_MAX_TX_SKB_BUDGET, sz.tx) == nil {
		s.txBudget = sz.tx
	}
	return s, nil
}

// bind binds the socket to ifindex/queue with flags; sharedFD is the socket
// whose UMEM to share (with XDP_SHARED_UMEM in flags).
func (s *socket) bind(ifindex, queue int, flags uint16, sharedFD int) error {
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue), SharedUmemFD: uint32(sharedFD)}
	if err := unix.Bind(s.fd, sa); err != nil {
		return os.NewSyscallError("bind", err)
	}
	return nil
}

// statistics reads XDP_STATISTICS (Linux 4.18; the ring-full and
// empty-ring counters since 5.9).
func (s *socket) statistics() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st, err
}

// kickTX asks the kernel to send what is on the TX ring (sendto with no
// data) and returns its errno (0: none). EAGAIN and ENOBUFS mean "try
// again later", and ENETDOWN (an interface set down) that nothing was
// taken: the frames stay on the ring. EBUSY, in copy mode, means that the
// kernel took one frame and dropped it (__dev_direct_xmit's
// NET_XMIT_DROP: the interface is down or has no carrier), completing it
// as if sent, after sending those before it (txHalf.kick counts it).
func (s *socket) kickTX() unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// kickRX wakes the driver to refill from the fill ring (zero-copy mode
// with need_wakeup).
func (s *socket) kickRX() {
	_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// closeFD closes the socket (unbinding it) but keeps the rings mapped.
func (s *socket) closeFD() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

func (s *socket) unmap() {
	for i, m := range s.maps {
		if m != nil {
			unix.Munmap(m)
			s.maps[i] = nil
		}
	}
}

func (s *socket) close() {
	s.closeFD()
	s.unmap()
}
