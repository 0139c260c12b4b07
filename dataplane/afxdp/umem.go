//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/plural"
	"golang.org/x/sys/unix"
)

// Mode is the UMEM's data path: copy or zero-copy. One UMEM has one mode;
// sockets that share it inherit it.
type Mode int

const (
	// ModeAuto tries zero-copy and falls back to copy mode.
	ModeAuto Mode = iota
	// ModeCopy copies frames between the driver's buffers and the UMEM
	// (works on every device, veth included).
	ModeCopy
	// ModeZeroCopy lets the driver DMA into the UMEM; Open fails if the
	// driver lacks it.
	ModeZeroCopy
)

// UMEMConfig sizes a UMEM.
type UMEMConfig struct {
	// FrameSize is the chunk size in bytes, a power of 2 in [2048, 4096]
	// (default dataplane.DefaultFrameSize).
	FrameSize int
	// NumFrames is the number of chunks (default 8192). Each queue bound
	// to the UMEM keeps up to its fill ring size of them in the kernel.
	NumFrames int
	// Mode is copy, zero-copy or auto (default).
	Mode Mode
	// Mapped maps the memory outside the Go heap (mmap(2)) instead of
	// allocating it there, for a UMEM that lives as long as its user
	// (wgpio up): Go heap memory counts toward the garbage collector's
	// target, which let the process's heap, and its resident memory,
	// grow to about twice the frame memory (68 MiB a queue by default in wgpio up)
	// before each collection. UMEM.Free unmaps it.
	Mapped bool
}

// UMEM is the memory AF_XDP sockets receive into and transmit from, cut
// into chunks of FrameSize bytes and handed out through a dataplane.Pool.
// Several ports (e.g. a gateway's LAN and WAN) opened with the same UMEM in
// Config share it, so that a frame received on one is transmitted on the
// other without a copy (XDP_SHARED_UMEM across devices and queues, Linux
// 5.10). Safe for concurrent use.
//
// The memory is Go heap memory, page aligned and pinned by the kernel while
// a socket uses it; it stays valid for frames callers still hold after
// every port is closed, and is freed by the garbage collector. With
// UMEMConfig.Mapped it is mapped memory instead, valid until Free.
type UMEM struct {
	mem     []byte
	mapping []byte // the whole mapping (UMEMConfig.Mapped), until Free; guarded by mu
	pool    *dataplane.Pool
	mode    Mode

	mu       sync.Mutex
	live     map[*socket]bool // bound sockets using the UMEM; guarded by mu
	zerocopy bool             // mode of the live sockets; guarded by mu
}

// NewUMEM allocates a UMEM. Sockets register it when the first port opens
// on it.
func NewUMEM(cfg UMEMConfig) (*UMEM, error) {
	if cfg.FrameSize == 0 {
		cfg.FrameSize = dataplane.DefaultFrameSize
	}
	if cfg.NumFrames == 0 {
		cfg.NumFrames = 8192
	}
	if cfg.FrameSize != 2048 && cfg.FrameSize != 4096 {
		return nil, fmt.Errorf("afxdp: frame size %d is not 2048 or 4096 (aligned UMEM chunks of at most a page)", cfg.FrameSize)
	}
	if cfg.NumFrames < 64 {
		return nil, fmt.Errorf("afxdp: %s: too few (at least 64)", plural.Count(cfg.NumFrames, "frame", "frames"))
	}
	if cfg.Mode < ModeAuto || cfg.Mode > ModeZeroCopy {
		return nil, fmt.Errorf("afxdp: UMEM mode %d is none of ModeAuto, ModeCopy and ModeZeroCopy", cfg.Mode)
	}
	// The kernel pins the whole UMEM (XDP_UMEM_REG): one larger than the
	// machine's memory can never be registered, and its allocation on the
	// Go heap would end the process (fatal error: out of memory) instead
	// of failing.
	if ram := totalMemory(); ram > 0 && uint64(cfg.NumFrames) > ram/uint64(cfg.FrameSize) {
		return nil, fmt.Errorf("afxdp: a UMEM of %s of %d bytes is larger than the machine's memory (%d MiB): ask for fewer frames (NumFrames), or smaller fill rings (a port's own UMEM holds twice its fill ring's frames per queue)",
			plural.Count(cfg.NumFrames, "frame", "frames"), cfg.FrameSize, ram>>20)
	}
	// Page aligned (the kernel's XDP_UMEM_REG requires it), and on huge
	// pages where the kernel gives them (dataplane.AllocMemory).
	var mem, mapping []byte
	if cfg.Mapped {
		var err error
		if mem, mapping, err = mapMemory(cfg.NumFrames * cfg.FrameSize); err != nil {
			return nil, err
		}
	} else {
		mem = dataplane.AllocMemory(cfg.NumFrames * cfg.FrameSize)
	}
	pool, err := dataplane.NewPool(mem, cfg.FrameSize, xdpPacketHeadroom)
	if err != nil {
		if mapping != nil {
			unix.Munmap(mapping)
		}
		return nil, fmt.Errorf("afxdp: create pool: %w", err)
	}
	return &UMEM{mem: mem, mapping: mapping, pool: pool, mode: cfg.Mode, live: make(map[*socket]bool)}, nil
}

// totalMemory returns the machine's memory in bytes (sysinfo(2)), or 0
// when it cannot tell.
func totalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(max(si.Unit, 1))
}

// Pool is the UMEM's frame pool.
func (u *UMEM) Pool() *dataplane.Pool { return u.pool }

// ZeroCopy reports whether the UMEM's sockets run in zero-copy mode (false
// in copy mode or before any socket is bound).
func (u *UMEM) ZeroCopy() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.zerocopy
}

// errShare says a socket could not share the UMEM.
var errShare = errors.New("afxdp: cannot share UMEM")

// socket creates a socket bound to ifindex/queue on this UMEM: the first
// one registers the memory and picks the mode, the others share it. A
// failure to share wraps errShare.
//
// A queue stays bound for a moment after its last socket closes (the
// kernel releases the buffer pool from a work queue), so a bind that finds
// the queue busy is retried with a fresh socket for up to bindRetry.
func (u *UMEM) socket(ifindex, queue int, sz ringSizes) (*socket, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.mem == nil {
		return nil, errUMEMFreed
	}
	start := time.Now()
	for {
		s, err := u.socketOnce(ifindex, queue, sz)
		if err == nil || !errors.Is(err, unix.EBUSY) {
			return s, err
		}
		if time.Since(start) > bindRetry {
			return nil, fmt.Errorf("queue %d busy for %v (another AF_XDP socket or a zero-copy user holds it): %w", queue, bindRetry, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bindRetry is how long a bind to a busy queue is retried.
const bindRetry = 2 * time.Second

func (u *UMEM) socketOnce(ifindex, queue int, sz ringSizes) (*socket, error) {
	if len(u.live) > 0 {
		var owner *socket
		for s := range u.live {
			owner = s
			break
		}
		if err := haveSharedUMEM(); conclusive(err) {
			return nil, fmt.Errorf("%w: %w", errShare, err)
		}
		s, err := newSocket(nil, sz)
		if err != nil {
			return nil, err
		}
		s.wakeup = owner.wakeup
		// Flags other than XDP_SHARED_UMEM are refused: the mode and
		// need_wakeup come from the owner's pool (net/xdp/xsk.c, xsk_bind).
		if err := s.bind(ifindex, queue, unix.XDP_SHARED_UMEM, owner.fd); err != nil {
			s.close()
			return nil, fmt.Errorf("%w: bind queue %d with XDP_SHARED_UMEM: %w", errShare, queue, diagnose(err))
		}
		u.live[s] = true
		return s, nil
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&u.mem[0]))),
		Len:  uint64(len(u.mem)),
		Size: uint32(u.pool.FrameSize()),
	}
	// need_wakeup unless the kernel is known to lack it.
	wakeup := !conclusive(haveNeedWakeup())
	try := func(mode uint16) (*socket, error) {
		s, err := newSocket(&reg, sz)
		if err != nil {
			return nil, err
		}
		if wakeup {
			mode |= unix.XDP_USE_NEED_WAKEUP
		}
		if err := s.bind(ifindex, queue, mode, 0); err != nil {
			s.close()
			return nil, diagnose(err)
		}
		s.wakeup = wakeup
		return s, nil
	}
	var s *socket
	var err error
	switch u.mode {
	case ModeZeroCopy:
		if s, err = try(unix.XDP_ZEROCOPY); err != nil {
			return nil, fmt.Errorf("%w: zero-copy bind of queue %d (the driver lacks AF_XDP zero-copy; use ModeCopy or ModeAuto): %w", ErrXDPUnsupported, queue, err)
		}
		u.zerocopy = true
	case ModeAuto:
		if s, err = try(unix.XDP_ZEROCOPY); err == nil {
			u.zerocopy = true
			break
		}
		fallthrough
	default:
		if s, err = try(unix.XDP_COPY); err != nil {
			return nil, fmt.Errorf("bind queue %d: %w", queue, err)
		}
		u.zerocopy = false
	}
	u.live[s] = true
	return s, nil
}

// forget drops a closed socket.
func (u *UMEM) forget(s *socket) {
	u.mu.Lock()
	delete(u.live, s)
	u.mu.Unlock()
}
