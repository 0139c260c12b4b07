package tundev

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
)

// OffloadTUN is a TUN interface for a host's own traffic (a fast-path
// gateway's exception TUN) with the kernel's offloads, through
// wireguard-go's tun package (golang.zx2c4.com/wireguard/tun) as
// tun.CreateTUN opens its own: IFF_VNET_HDR with the TSO and USO
// offloads. A batch written (WriteBatch) has the consecutive segments of
// each TCP or UDP flow coalesced into one large packet with its
// virtio-net header (wireguard-go's GRO), which the kernel takes in one
// write(2), routes, filters and NATs once and segments on its way out
// (GSO); a large packet the kernel sends into it is split into its
// segments by Read (GSO split). A full tunnel's TCP stream thus costs the
// writer a system call per run of a burst instead of one per packet.
//
// Writes go through writers, one per caller that may write concurrently
// (a fast-path worker: its queue), each a tun.Device over its own
// duplicate of the interface's file descriptor with its own coalescing
// tables and its own staging buffers: writers never wait for each other.
// Their files are opened so that os.File does not hand them to the
// runtime's poller (os.NewFile of a blocking descriptor, made
// non-blocking after): a write the kernel refuses for want of room
// (EAGAIN: the queue's send buffer, TUNSETSNDBUF) returns at once, and
// its packets are dropped and counted as full, as MultiQueueTUN.Write
// does, where tun.CreateTUN's own file, the poller's, has wireguard-go's
// Write wait until the kernel takes the packet: a worker never waits for
// the host. Read goes through a third tun.Device, over a descriptor the
// poller does handle.
//
// What it loses against MultiQueueTUN: one queue only (the kernel
// serialises nothing on a TUN write, so the writers still run in
// parallel; Read is one reader's); no SetAllowed or AnswerNoRoute (an
// exception TUN's routes are the allowed IPs: the kernel routes nothing
// else into it); and, when some writes of a batch went through and others
// were refused, each refused write counts as one dropped packet although
// it may have carried several coalesced ones (wireguard-go's Write tells
// the errors, not which packets they were): the drops are then a lower
// bound (TXPackets the rest); a batch of which nothing went through (the
// interface down or gone, the queue full) counts all its packets.
type OffloadTUN struct {
	name    string
	mtu     int
	r       tun.Device
	writers []*offloadWriter
	ctr     tunCounters
	// kc reads the kernel's counters of the interface (Stats).
	kc        linkCounters
	closeOnce sync.Once
	closed    atomic.Bool // Close was called
}

// offloadWriter is one writer of an OffloadTUN: dev (over a descriptor
// of its own), and the staging buffers a batch is copied into, each with
// the room in front for the virtio-net header (offloadHeadroom) and
// behind for the segments coalesced into it. Owned by one caller at a
// time (WriteBatch's writer); padded to lines of its own.
type offloadWriter struct {
	dev   tun.Device
	bufs  [offloadBatch][]byte
	batch [offloadBatch][]byte
	meta  [offloadBatch]groMeta // of batch's packets (follows)
	_     [64]byte
}

const (
	// offloadBatch is the most packets one write of a writer coalesces;
	// a longer batch is written in parts of this many.
	offloadBatch = 64
	// offloadHeadroom is the room in front of each staged packet for its
	// virtio-net header (10 bytes, struct virtio_net_hdr), which
	// wireguard-go's Write puts in front of the offset it is given.
	offloadHeadroom = 16
	// offloadMaxPacket is the longest packet staged: an IP packet's
	// largest (and the most a coalesced one grows to).
	offloadMaxPacket = 65535
)

// OpenOffloadTUN creates (or attaches to) TUN interface name, with
// writers writers (1 to 256: WriteBatch's writer is taken modulo the
// count), sets its MTU (mtu bytes, 68 to 65,535: the TUN driver's range)
// and brings it up. A name that is empty or holds a %d (tun%d) lets the
// kernel choose the interface's name. It needs CAP_NET_ADMIN and
// allocates offloadBatch packets of 64 KiB per writer (4 MiB, touched as
// coalesced packets fill them). Close detaches it: the interface
// disappears unless it was made persistent by someone else.
func OpenOffloadTUN(name string, writers, mtu int) (_ *OffloadTUN, err error) {
	if writers < 1 || writers > 256 {
		return nil, fmt.Errorf("tundev: %d TUN writers, want 1 to 256", writers)
	}
	if err := checkTUNArgs(name, mtu); err != nil {
		return nil, err
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tundev: open /dev/net/tun (load the tun module, run as root or with CAP_NET_ADMIN): %w", os.NewSyscallError("open", err))
	}
	t := &OffloadTUN{name: name, mtu: mtu}
	var files []*os.File // the writers' files not yet handed to a tun.Device
	handed := false      // fd is the reader's file's (closed with it)
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			if !handed {
				unix.Close(fd)
			}
			t.Close()
		}
	}()
	var req ifreqFlags
	copy(req.name[:], name)
	req.flags = unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); errno != 0 {
		if errno == unix.EPERM {
			return nil, fmt.Errorf("tundev: create TUN %s: missing CAP_NET_ADMIN: %w", name, os.NewSyscallError("ioctl TUNSETIFF", errno))
		}
		if _, err := net.InterfaceByName(name); errno == unix.EINVAL && err == nil {
			return nil, fmt.Errorf("tundev: create TUN %s: an interface named %s exists and is not a TUN of one queue (ip -d link show %s); choose another name: %w",
				name, name, name, os.NewSyscallError("ioctl TUNSETIFF", errno))
		}
		return nil, fmt.Errorf("tundev: create TUN %s: %w", name, os.NewSyscallError("ioctl TUNSETIFF", errno))
	}
	name = req.String() // the kernel's choice for a pattern
	t.name = name
	// The writers' files first, while the descriptor is blocking: os.File
	// leaves them out of the poller. Non-blocking then, for all (one
	// open file description): their writes return EAGAIN, not wait.
	for range writers {
		wfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("tundev: duplicate the descriptor of TUN %s: %w", name, os.NewSyscallError("fcntl", err))
		}
		files = append(files, os.NewFile(uintptr(wfd), "/dev/net/tun"))
	}
	// The reader's: non-blocking, in the poller (tun.CreateUnmonitoredTUNFromFD
	// makes it so), with the offloads set as tun.CreateTUN sets them.
	handed = true
	if t.r, _, err = tun.CreateUnmonitoredTUNFromFD(fd); err != nil {
		return nil, fmt.Errorf("tundev: TUN %s: %w", name, err)
	}
	for len(files) > 0 {
		dev, err := tun.CreateTUNFromFile(files[0], mtu)
		if err != nil {
			return nil, fmt.Errorf("tundev: TUN %s: %w", name, err)
		}
		files = files[1:]
		// wireguard-go's watchers send the interface's events (up,
		// down, MTU), which nothing here needs: drained until Close
		// closes the channel, so that they never block.
		go func() {
			for range dev.Events() {
			}
		}()
		w := &offloadWriter{dev: dev}
		for i := range w.bufs {
			w.bufs[i] = make([]byte, offloadHeadroom+offloadMaxPacket)
		}
		t.writers = append(t.writers, w)
	}
	if err := setMTUUp(name, mtu); err != nil {
		return nil, err
	}
	if err := t.kc.open(name); err != nil {
		return nil, err
	}
	// Read splits a large packet into at most BatchSize segments and
	// drops one of more (too_big). The kernel hands the interface no
	// GSO packet of more segments than its gso_max_segs: it segments a
	// larger one in software first (netif_skb_features), as for any
	// device. The default (65,535) let a forwarded packet that a NIC's
	// GRO built from small segments (an MSS under about 512), or the
	// host's own TCP at such an MSS, reach Read whole and be lost, its
	// flow stalled.
	if err := t.kc.setGSOMaxSegs(t.r.BatchSize()); err != nil {
		return nil, fmt.Errorf("tundev: set gso_max_segs %d on %s: %w", t.r.BatchSize(), name, err)
	}
	return t, nil
}

// WriteBatch hands pkts (IP packets) to the kernel through writer
// (taken modulo the number of writers) and returns the number it took.
// It copies each packet into the writer's staging buffers, coalesces
// each TCP or UDP flow's consecutive segments (wireguard-go's GRO, kept
// to what Linux's GRO would coalesce: offloadgro_linux.go) and writes the
// result, offloadBatch packets at a time at most. It never waits: a
// packet the kernel refuses is dropped and counted by reason (Stats;
// TUNDropReason says which errno is which), as is an empty packet or one
// longer than 65,535 bytes (malformed). It keeps nothing of pkts and
// allocates nothing unless the kernel refuses a write. One caller per
// writer at a time; different writers may write concurrently.
func (t *OffloadTUN) WriteBatch(writer int, pkts [][]byte) int {
	w := t.writers[uint(writer)%uint(len(t.writers))]
	var drops [NumTUNDropReasons]uint64
	sent, k := 0, 0
	for _, p := range pkts {
		if len(p) == 0 || len(p) > offloadMaxPacket {
			drops[TUNDropMalformed]++
			continue
		}
		m := groMetaOf(p)
		if k == offloadBatch || k > 0 && !w.follows(k, p, m) {
			sent += w.write(k, &drops)
			k = 0
		}
		w.batch[k] = w.bufs[k][:offloadHeadroom+copy(w.bufs[k][offloadHeadroom:], p)]
		w.meta[k] = m
		k++
	}
	if k > 0 {
		sent += w.write(k, &drops)
	}
	t.ctr.tx.Add(uint64(sent))
	if drops != ([NumTUNDropReasons]uint64{}) {
		for r, n := range drops {
			if n > 0 {
				t.ctr.drops.Add(TUNDropReason(r), n)
			}
		}
	}
	return sent
}

// write writes w's first k staged packets in one wireguard-go Write
// (which coalesces them) and returns the number the kernel took, the
// rest counted in drops.
func (w *offloadWriter) write(k int, drops *[NumTUNDropReasons]uint64) int {
	n, err := w.dev.Write(w.batch[:k], offloadHeadroom)
	if err == nil {
		return k
	}
	return refused(err, n > 0, k, drops)
}

// refused counts in drops the packets of a write of k packets that
// wireguard-go's Write answered with err (the refused writes' errors,
// joined; os.ErrClosed where the interface is gone, EBADFD, after which
// it writes nothing more), some taken if some is true, and returns the
// number taken. Nothing taken: all k are dropped, by the reason of the
// first error but one packet for each further error, by its reason.
// Some taken: one packet for each error (a lower bound: a refused write
// may have carried several coalesced packets).
func refused(err error, some bool, k int, drops *[NumTUNDropReasons]uint64) (sent int) {
	if errors.Is(err, os.ErrClosed) {
		drops[TUNDropDown] += uint64(k)
		return 0
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) == 0 {
		errs = []error{err}
	}
	if some {
		n := min(len(errs), k)
		for _, e := range errs[:n] {
			drops[writeReason(e)]++
		}
		return k - n
	}
	for _, e := range errs[1:min(len(errs), k)] {
		drops[writeReason(e)]++
		k--
	}
	drops[writeReason(errs[0])] += uint64(k)
	return 0
}

// writeReason is the drop reason of a refused TUN write's error (the
// errno of write(2), as MultiQueueTUN.Write classes it).
func writeReason(err error) TUNDropReason {
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
		return TUNDropFull
	case errors.Is(err, unix.EIO), errors.Is(err, unix.EBADFD):
		return TUNDropDown
	case errors.Is(err, unix.EINVAL):
		return TUNDropMalformed
	}
	return TUNDropWriteError
}

// Read returns packets the kernel sent into the interface, a large one
// (GSO) split into its segments, copying each to bufs[i][offset:] and its
// length to sizes[i]; bufs should be BatchSize long, each 65,535 bytes
// past offset. It blocks until there is one. A large packet that does
// not fit bufs is dropped and counted (TUNDropTooBig), and so is one
// wireguard-go's split refuses. A UDP checksum wireguard-go completed to
// 0 is sent as 0xffff (udpZeroChecksum). After Close it returns
// os.ErrClosed; when the interface is gone (ip link del), an error that
// says so and is not os.ErrClosed. One reader at a time.
func (t *OffloadTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	for {
		n, err := t.r.Read(bufs, sizes, offset)
		if err == nil {
			for i := range n {
				udpZeroChecksum(bufs[i][offset : offset+sizes[i]])
			}
			t.ctr.rx.Add(uint64(n))
			return n, nil
		}
		var pe *os.PathError
		if errors.Is(err, os.ErrClosed) || errors.As(err, &pe) {
			if !t.closed.Load() {
				// wireguard-go's Read says os.ErrClosed for
				// EBADFD, a TUN whose interface was deleted:
				// not a Close, which a caller would take it for.
				return 0, fmt.Errorf("tundev: read %s: the interface is gone (deleted: ip link del %s?), reopen it: %v", t.name, t.name, err)
			}
			return 0, err
		}
		t.ctr.drops.Add(TUNDropTooBig, 1)
	}
}

// File returns the reader's file (one open file description with the
// writers': TUNSETSNDBUF through it sets theirs).
func (t *OffloadTUN) File() *os.File { return t.r.File() }

// BatchSize is the most packets one Read returns.
func (t *OffloadTUN) BatchSize() int { return t.r.BatchSize() }

// MTU returns the MTU the interface was opened with.
func (t *OffloadTUN) MTU() int { return t.mtu }

// Writers is the number of writers.
func (t *OffloadTUN) Writers() int { return len(t.writers) }

// Stats returns a snapshot of the counters, the kernel's
// kernel_queue_full read over netlink (one request: not for a data path;
// see Counters). Safe for concurrent use.
func (t *OffloadTUN) Stats() TUNStats {
	s := t.Counters()
	t.kc.read(&s)
	return s
}

// Counters returns a snapshot of the counters the TUN keeps itself:
// Stats without the kernel's kernel_queue_full. Safe for concurrent use.
func (t *OffloadTUN) Counters() TUNStats { return t.ctr.stats() }

// Close detaches the interface: the reader and every writer. No write
// may be in progress or follow (the writers' buffers are not guarded);
// a Read in progress returns os.ErrClosed.
func (t *OffloadTUN) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		var errs []error
		if t.r != nil {
			errs = append(errs, t.r.Close())
		}
		for _, w := range t.writers {
			errs = append(errs, w.dev.Close())
		}
		t.kc.close()
		err = errors.Join(errs...)
	})
	return err
}
