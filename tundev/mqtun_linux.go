package tundev

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gaissmai/bart"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/header"
)

// MultiQueueTUN is a tun.Device over a kernel TUN interface opened with
// IFF_TUN|IFF_NO_PI|IFF_MULTI_QUEUE: one file descriptor per queue, one
// reader goroutine per queue feeding Read, and writes spread over the queues
// by a hash of the packet's flow, so that one flow always uses one queue
// (no reordering) and different flows use different queues (the kernel then
// processes them on different CPUs).
//
// The seed report's finding: stock wireguard-go on such a TUN, with no other
// change, gets most of the gain of a full kernel bypass on the plaintext side.
//
// Read may be called by one goroutine at a time (wireguard-go has one TUN
// reader); Write is safe for concurrent use (each queue's fd is written with
// one write(2) per packet, which the kernel serialises) and never waits for
// the kernel: what it refuses is dropped and counted (Stats).
type MultiQueueTUN struct {
	name   string
	mtu    int
	files  []*os.File
	fds    []int
	events chan tun.Event

	batches chan *tunBatch
	free    chan *tunBatch
	pending *tunBatch // partly consumed by Read; owned by the reader

	// fdMu guards fds against Close: Write holds it for reading, Close
	// for writing while it closes the files and sets fds to nil.
	fdMu sync.RWMutex
	ctr  tunCounters
	// allowed is SetAllowed's table (nil: off), loaded once per Read;
	// allowedMu orders its writers (SetAllowed, UpdateAllowed).
	allowed   atomic.Pointer[bart.Table[struct{}]]
	allowedMu sync.Mutex
	// icmp answers no_route drops (AnswerNoRoute; nil: not), loaded
	// once per Read that drops one.
	icmp atomic.Pointer[hostICMP]
	// kc reads the kernel's counters of the interface (Stats).
	kc linkCounters

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
	readErr   chan error
}

// tunBatch is up to tunBatchSize packets read by one queue's reader.
type tunBatch struct {
	bufs  [tunBatchSize][]byte
	sizes [tunBatchSize]int
	n     int
	next  int // first packet not yet handed to Read
}

const tunBatchSize = 64

// ifreq for TUNSETIFF: name and flags.
type ifreqFlags struct {
	name  [unix.IFNAMSIZ]byte
	flags uint16
	_     [22]byte
}

// OpenMultiQueueTUN creates (or attaches to) TUN interface name with queues
// queues (1 to 256) and sets its MTU (mtu bytes, 68 to 65,535: the TUN
// driver's range) and brings it up. A name that is empty or holds a %d
// (tun%d) lets the kernel choose the interface's name, which Name
// returns. It needs CAP_NET_ADMIN. Close detaches every queue; the
// interface disappears with the last queue unless it was made persistent
// by someone else.
func OpenMultiQueueTUN(name string, queues, mtu int) (*MultiQueueTUN, error) {
	if queues < 1 || queues > 256 {
		return nil, fmt.Errorf("tundev: %d TUN queues, want 1 to 256", queues)
	}
	if err := checkTUNArgs(name, mtu); err != nil {
		return nil, err
	}
	t := &MultiQueueTUN{
		name:    name,
		mtu:     mtu,
		events:  make(chan tun.Event, 4),
		batches: make(chan *tunBatch, 2*queues),
		free:    make(chan *tunBatch, 4*queues),
		closed:  make(chan struct{}),
		readErr: make(chan error, 1),
	}
	for i := 0; i < queues; i++ {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.closeFDs()
			return nil, fmt.Errorf("tundev: open /dev/net/tun (load the tun module, run as root or with CAP_NET_ADMIN): %w", os.NewSyscallError("open", err))
		}
		var req ifreqFlags
		copy(req.name[:], name)
		req.flags = unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); errno != 0 {
			unix.Close(fd)
			t.closeFDs()
			if errno == unix.EPERM {
				return nil, fmt.Errorf("tundev: create TUN %s: missing CAP_NET_ADMIN: %w", name, os.NewSyscallError("ioctl TUNSETIFF", errno))
			}
			if _, err := net.InterfaceByName(name); errno == unix.EINVAL && err == nil {
				// The kernel refuses a name another kind of interface
				// holds, or a TUN made without multi-queue
				// (drivers/net/tun.c, tun_set_iff).
				return nil, fmt.Errorf("tundev: create TUN %s: an interface named %s exists and is not a multi-queue TUN (ip -d link show %s); choose another name: %w",
					name, name, name, os.NewSyscallError("ioctl TUNSETIFF", errno))
			}
			return nil, fmt.Errorf("tundev: create TUN %s queue %d: %w", name, i, os.NewSyscallError("ioctl TUNSETIFF", errno))
		}
		// The name the kernel gave the first queue (a pattern's, or the
		// same): the others attach to that interface.
		name = req.String()
		t.name = name
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			t.closeFDs()
			return nil, fmt.Errorf("tundev: set TUN queue non-blocking: %w", os.NewSyscallError("fcntl", err))
		}
		t.fds = append(t.fds, fd)
		t.files = append(t.files, os.NewFile(uintptr(fd), "/dev/net/tun"))
	}
	if err := setMTUUp(name, mtu); err != nil {
		t.closeFDs()
		return nil, err
	}
	if err := t.kc.open(name); err != nil {
		t.closeFDs()
		return nil, err
	}
	for i := 0; i < 4*queues; i++ {
		b := &tunBatch{}
		for j := range b.bufs {
			b.bufs[j] = make([]byte, 65535)
		}
		t.free <- b
	}
	for i := range t.fds {
		t.wg.Add(1)
		go t.reader(i)
	}
	t.events <- tun.EventUp
	return t, nil
}

// checkTUNArgs checks the name and MTU OpenMultiQueueTUN and
// OpenOffloadTUN are given, before anything is created.
func checkTUNArgs(name string, mtu int) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("tundev: interface name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	// drivers/net/tun.c: MIN_MTU 68 (RFC 791 §3.2), MAX_MTU 65535.
	if mtu < header.IPv4MinMTU || mtu > 65535 {
		return fmt.Errorf("tundev: TUN %s: MTU %d, want %d to 65535 bytes", name, mtu, header.IPv4MinMTU)
	}
	return nil
}

// String returns the interface name in r (up to its first NUL).
func (r *ifreqFlags) String() string {
	n := 0
	for n < len(r.name) && r.name[n] != 0 {
		n++
	}
	return string(r.name[:n])
}

func setMTUUp(name string, mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tundev: socket for ioctl: %w", os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("tundev: %w", err)
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("tundev: set MTU %d on %s: %w", mtu, name, os.NewSyscallError("ioctl SIOCSIFMTU", err))
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tundev: get flags of %s: %w", name, os.NewSyscallError("ioctl SIOCGIFFLAGS", err))
	}
	noLinkLocal(name)
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tundev: bring %s up: %w", name, os.NewSyscallError("ioctl SIOCSIFFLAGS", err))
	}
	return nil
}

// noLinkLocal sets the IPv6 address generation mode of the interface name
// (in the calling thread's namespace) to none (IN6_ADDR_GEN_MODE_NONE),
// before it first comes up, when the kernel would give a TUN a random
// link-local address: Linux's wg0 has none, and with one the host sent
// router solicitations and MLD reports into the tunnel from it. Best
// effort: with IPv6 off on the interface there is nothing to stop.
func noLinkLocal(name string) {
	h, err := netlink.NewHandle()
	if err != nil {
		return
	}
	defer h.Close()
	if l, err := h.LinkByName(name); err == nil {
		_ = h.LinkSetIP6AddrGenMode(l, 1)
	}
}

func (t *MultiQueueTUN) closeFDs() {
	for _, f := range t.files {
		f.Close()
	}
	t.files, t.fds = nil, nil
}

// reader reads queue i: one blocking read, then as many more as are ready
// without blocking, and hands the batch to Read.
func (t *MultiQueueTUN) reader(i int) {
	defer t.wg.Done()
	f := t.files[i]
	rc, err := f.SyscallConn()
	if err != nil {
		t.fail(err)
		return
	}
	for {
		var b *tunBatch
		select {
		case b = <-t.free:
		case <-t.closed:
			return
		}
		b.n, b.next = 0, 0
		// os.File in non-blocking mode through the runtime poller: the
		// first read parks the goroutine; the rest drain without blocking.
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			for b.n < tunBatchSize {
				n, err := unix.Read(int(fd), b.bufs[b.n])
				if err == unix.EAGAIN {
					return b.n > 0
				}
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					rerr = err
					return true
				}
				b.sizes[b.n] = n
				b.n++
			}
			return true
		})
		if err == nil {
			err = rerr
		}
		if b.n > 0 {
			select {
			case t.batches <- b:
			case <-t.closed:
				t.ctr.drops.Add(TUNDropClosed, uint64(b.n))
				return
			}
		} else {
			t.free <- b
		}
		if err != nil {
			select {
			case <-t.closed:
			default:
				if errors.Is(err, unix.EBADFD) {
					// tun_chr_read_iter: the queue is detached,
					// its interface deleted.
					err = fmt.Errorf("the interface is gone (deleted: ip link del %s), reopen it: %w", t.name, err)
				}
				t.fail(fmt.Errorf("tundev: read %s queue %d: %w", t.name, i, err))
			}
			return
		}
	}
}

func (t *MultiQueueTUN) fail(err error) {
	select {
	case t.readErr <- err:
	default:
	}
}

// File returns the first queue's file.
func (t *MultiQueueTUN) File() *os.File { return t.files[0] }

// Read returns packets from any queue, merged, copying each to
// bufs[i][offset:] and its length to sizes[i]. It blocks until at least one
// packet is there, and may then return 0 packets (all of a batch
// dropped); after Close it returns os.ErrClosed. When a queue cannot be
// read (the interface deleted: ip link del), Read returns that error
// (after the packets read before it), and so does every later call. A packet larger than its
// buffer past offset is dropped and counted (TUNDropTooBig), and so is one
// SetAllowed refuses.
func (t *MultiQueueTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	b := t.pending
	if b == nil {
		select {
		case b = <-t.batches:
		case err := <-t.readErr:
			// Every later Read returns it too: the reader that
			// failed is gone, and the others' errors were not kept.
			t.fail(err)
			return 0, err
		case <-t.closed:
			return 0, os.ErrClosed
		}
	}
	allowed := t.allowed.Load()
	var drops [NumTUNDropReasons]uint64
	n := 0
	for n < len(bufs) && b.next < b.n {
		sz := b.sizes[b.next]
		if len(bufs[n])-offset < sz {
			// Too small a buffer: the packet is dropped (counted as
			// TUNDropTooBig), as a short read from the kernel TUN
			// would truncate it.
			b.next++
			drops[TUNDropTooBig]++
			continue
		}
		if allowed != nil {
			if r := notAllowed(allowed, b.bufs[b.next][:sz]); r != NumTUNDropReasons {
				if r == TUNDropNoRoute {
					if h := t.icmp.Load(); h != nil {
						h.unreachable(b.bufs[b.next][:sz], &t.ctr)
					}
				}
				b.next++
				drops[r]++
				continue
			}
		}
		copy(bufs[n][offset:], b.bufs[b.next][:sz])
		sizes[n] = sz
		n++
		b.next++
	}
	t.ctr.rx.Add(uint64(n))
	if drops != ([NumTUNDropReasons]uint64{}) {
		for r, k := range drops {
			if k > 0 {
				t.ctr.drops.Add(TUNDropReason(r), k)
			}
		}
	}
	if b.next < b.n {
		t.pending = b
	} else {
		t.pending = nil
		t.free <- b
	}
	return n, nil
}

// Write hands each packet bufs[i][offset:] to the kernel on the queue its
// flow hashes to, one write(2) each, and returns the number the kernel
// took. It never waits: a packet the kernel refuses is dropped and counted
// by reason (Stats; TUNDropReason says which errno is which), as the
// kernel's own paths drop what a full queue or a down device cannot take,
// so that a writer handing packets to the host (a fast-path worker, a
// wireguard-go receive routine) goes on with its other traffic however
// slowly the host takes them. Its error is os.ErrClosed after Close, else
// nil: a refused packet is no error (wireguard-go logs every error Write
// returns, once per batch). It neither allocates nor keeps bufs; safe for
// concurrent use (a read lock per call keeps Close from reusing the file
// descriptors under it).
func (t *MultiQueueTUN) Write(bufs [][]byte, offset int) (int, error) {
	t.fdMu.RLock()
	defer t.fdMu.RUnlock()
	if t.fds == nil {
		return 0, os.ErrClosed
	}
	var drops [NumTUNDropReasons]uint64
	sent := 0
	for _, b := range bufs {
		p := b[offset:]
		q := 0
		if len(t.fds) > 1 {
			q = int(FlowHash(p) % uint32(len(t.fds)))
		}
		err := error(unix.EINTR)
		for err == unix.EINTR {
			_, err = unix.Write(t.fds[q], p)
		}
		switch err {
		case nil:
			sent++
		case unix.EAGAIN, unix.ENOBUFS, unix.ENOMEM:
			drops[TUNDropFull]++
		case unix.EIO, unix.EBADFD:
			drops[TUNDropDown]++
		case unix.EINVAL:
			drops[TUNDropMalformed]++
		default:
			drops[TUNDropWriteError]++
		}
	}
	t.ctr.tx.Add(uint64(sent))
	if sent < len(bufs) {
		for r, n := range drops {
			if n > 0 {
				t.ctr.drops.Add(TUNDropReason(r), n)
			}
		}
	}
	return sent, nil
}

// Stats returns a snapshot of the counters, the kernel's
// kernel_queue_full read over netlink (one request, which may wait for
// the kernel's RTNL lock: not for a data path; see Counters). Safe for
// concurrent use.
func (t *MultiQueueTUN) Stats() TUNStats {
	s := t.Counters()
	t.kc.read(&s)
	return s
}

// Counters returns a snapshot of the counters the TUN keeps itself:
// Stats without the kernel's kernel_queue_full (zero), a few atomic loads.
// Safe for concurrent use.
func (t *MultiQueueTUN) Counters() TUNStats { return t.ctr.stats() }

// MTU returns the MTU the device was opened with.
func (t *MultiQueueTUN) MTU() (int, error) { return t.mtu, nil }

// Name returns the interface name.
func (t *MultiQueueTUN) Name() (string, error) { return t.name, nil }

// Events delivers tun.EventUp once at start; it is closed by Close.
func (t *MultiQueueTUN) Events() <-chan tun.Event { return t.events }

// BatchSize is the most packets one Read returns.
func (t *MultiQueueTUN) BatchSize() int { return tunBatchSize }

// NumQueues is the number of queues.
func (t *MultiQueueTUN) NumQueues() int { return len(t.files) }

// Close detaches every queue and stops the readers.
func (t *MultiQueueTUN) Close() error {
	var err error
	t.closeOnce.Do(func() {
		close(t.closed)
		var errs []error
		t.fdMu.Lock()
		for _, f := range t.files {
			if e := f.Close(); e != nil && !errors.Is(e, os.ErrClosed) {
				errs = append(errs, e)
			}
		}
		t.fds = nil
		t.fdMu.Unlock()
		t.kc.close()
		if h := t.icmp.Load(); h != nil {
			h.close()
		}
		t.wg.Wait()
		// What the readers queued and no Read took (one racing this
		// takes a batch before or returns it, never both).
		for drained := false; !drained; {
			select {
			case b := <-t.batches:
				t.ctr.drops.Add(TUNDropClosed, uint64(b.n-b.next))
			default:
				drained = true
			}
		}
		close(t.events)
		err = errors.Join(errs...)
	})
	return err
}

var _ tun.Device = (*MultiQueueTUN)(nil)
