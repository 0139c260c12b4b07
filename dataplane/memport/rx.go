package memport

import (
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/wakefd"
)

// rxHalf is the receive half of a queue: the consumer ends of the rings from
// every TX queue of the peer, and a cache of free buffers of the port's pool.
// Owned by one goroutine; armed, kicked and the counters are shared with the
// peer's TX halves and Stats.
type rxHalf struct {
	q     *Queue
	in    []consumer // in[i]: the ring from the peer's TX queue i
	next  int        // ring to read first in the next Receive (round robin)
	cache *dataplane.Cache
	_     [cacheLine]byte

	// armed is 1 after Arm and until a transmitter takes it (compare and
	// swap to 0) to signal the wait fd. kicked says a transmitter
	// signalled it since Arm last drained it.
	armed  atomic.Uint32
	kicked atomic.Bool
	_      [cacheLine]byte

	// The wait fd (internal/wakefd: an eventfd on Linux, rfd == wfd; a
	// pipe elsewhere). efdMu guards both against Close; taken only to
	// wake or drain.
	efdMu    sync.Mutex
	rfd, wfd int // read end (WaitFD), write end; -1 after Close
	// notify, if set (dataplane.Notifier), is what a wake-up sends on
	// instead of signalling the wait fd.
	notify atomic.Pointer[chan struct{}]

	stats counters
	_     [cacheLine]byte
}

var (
	_ dataplane.RX       = (*rxHalf)(nil)
	_ dataplane.Notifier = (*rxHalf)(nil)
)

// Receive fills frames[0:n] with received frames and returns n; it never
// blocks. The caller owns the frames (see dataplane.RX). Frames come from the
// port's pool with the transmitter's data offset, which is at least
// dataplane.MinHeadroom. Bad descriptors are dropped and counted.
func (rx *rxHalf) Receive(frames []dataplane.Frame) int {
	p := rx.q.port
	if p.closed.Load() || len(frames) == 0 {
		return 0
	}
	pool := p.pool
	chunkMask := ^uint64(pool.FrameSize() - 1)
	n := 0
	var bytes uint64
	var runt, tooLong, bad uint64
	for range len(rx.in) {
		if n == len(frames) {
			break
		}
		c := &rx.in[rx.next]
		if rx.next++; rx.next == len(rx.in) {
			rx.next = 0
		}
		want := uint32(len(frames) - n)
		avail := min(c.avail(want), want)
		if avail == 0 {
			continue
		}
		// The common descriptors first, the consumer index in a register.
		k, kb := c.getPlain(frames[n:n+int(avail)], pool, p.maxLen)
		n += k
		bytes += kb
		for range int(avail) - k {
			d := c.get()
			switch {
			case !descOK(pool, d):
				// Nothing in the descriptor can be trusted, so no
				// buffer is freed.
				bad++
			case d.len < ethHeaderLen:
				runt++
				rx.cache.Put(d.addr & chunkMask)
			case d.len > p.maxLen && !taggedFits(pool.Mem()[d.addr:d.addr+uint64(d.len)], p.maxLen):
				tooLong++
				rx.cache.Put(d.addr & chunkMask)
			default:
				frames[n] = pool.Frame(d.addr, d.len)
				bytes += uint64(d.len)
				n++
			}
		}
		c.release()
	}
	if n > 0 {
		add(&rx.stats.packets, uint64(n))
		add(&rx.stats.bytes, bytes)
	}
	if runt|tooLong|bad != 0 {
		add(&rx.stats.drops[dataplane.DropRunt], runt)
		add(&rx.stats.drops[dataplane.DropTooLong], tooLong)
		add(&rx.stats.drops[dataplane.DropBadDescriptor], bad)
	}
	return n
}

// getPlain reads descriptors into frames (one per frame; the caller checked
// that as many are available) while they are valid, at least Ethernet's
// header long and at most maxLen bytes, and returns how many it read and
// their bytes. The first other descriptor is left for the caller's checks.
func (c *consumer) getPlain(frames []dataplane.Frame, pool *dataplane.Pool, maxLen uint32) (n int, bytes uint64) {
	ring, mask, cons := c.desc, c.mask, c.cons
	for i := range frames {
		d := ring[cons&mask]
		if d.len < ethHeaderLen || d.len > maxLen || !descOK(pool, d) {
			break
		}
		frames[i] = pool.Frame(d.addr, d.len)
		cons++
		n++
		bytes += uint64(d.len)
	}
	c.cons = cons
	return n, bytes
}

// descOK reports whether d names data inside one buffer of pool, at least
// dataplane.MinHeadroom bytes into it.
func descOK(pool *dataplane.Pool, d desc) bool {
	return pool.Valid(d.addr, d.len) && d.addr&uint64(pool.FrameSize()-1) >= dataplane.MinHeadroom
}

// taggedFits reports whether a frame of len(b) > maxLen bytes is allowed
// because it carries an 802.1Q or 802.1ad tag (4 more bytes).
func taggedFits(b []byte, maxLen uint32) bool {
	if uint32(len(b)) > maxLen+vlanTagLen || len(b) < ethHeaderLen {
		return false
	}
	et := uint16(b[12])<<8 | uint16(b[13])
	return et == etherTypeVLAN || et == etherTypeQinQ
}

// Free returns frames to their pools (see dataplane.RX). The caller no
// longer owns them. It does not allocate.
func (rx *rxHalf) Free(frames []dataplane.Frame) { rx.cache.FreeFrames(frames) }

// WaitFD is the queue's wait fd (an eventfd on Linux, a pipe's read end
// elsewhere), or -1 after Close.
func (rx *rxHalf) WaitFD() int {
	rx.efdMu.Lock()
	defer rx.efdMu.Unlock()
	return rx.rfd
}

// PortClosed implements dataplane.PortCloser.
func (rx *rxHalf) PortClosed() bool { return rx.q.port.closed.Load() }

var _ dataplane.PortCloser = (*rxHalf)(nil)

// Arm asks the peer's transmitters to write WaitFD when they next put frames
// on a ring into this queue, and reports false if frames are already
// waiting or the port is closed (so the owner must not block).
//
// The handshake is Dekker's: Arm stores armed and then loads each ring's
// prod; a transmitter stores prod and then loads armed. With sequentially
// consistent atomics at least one of them sees the other's store, so a
// frame published while the owner arms is never missed.
func (rx *rxHalf) Arm() bool {
	if rx.q.port.closed.Load() {
		return false
	}
	if rx.kicked.Swap(false) {
		// Drain the wait fd a transmitter signalled (it signalled before
		// setting kicked, so the signal is there to read).
		rx.efdMu.Lock()
		if rx.rfd >= 0 {
			wakefd.Drain(rx.rfd)
		}
		rx.efdMu.Unlock()
	}
	rx.armed.Store(1)
	if armDelay != nil {
		armDelay() // tests: widen the window between arming and the check
	}
	for i := range rx.in {
		if rx.in[i].pending() {
			return false
		}
	}
	return true
}

// armDelay, when set (by tests only, before any port is used), runs in Arm
// between arming and looking at the rings, so that a test can transmit
// inside the window in which a frame must still wake the owner
// (TestNoLostWakeup). One nil check per Arm, that is per sleep.
var armDelay func()

// Notify makes a wake-up a non-blocking send on ch instead of a signal of
// the wait fd (nil: the wait fd again); see dataplane.Notifier. The
// transmitter that takes the arming sends, as it would signal: one token per
// arming, and the goroutine it wakes is readied on the transmitter's P.
func (rx *rxHalf) Notify(ch chan struct{}) {
	if ch == nil {
		rx.notify.Store(nil)
		return
	}
	rx.notify.Store(&ch)
}

// wake is called by a transmitter after it published frames on a ring into
// this queue: if the owner armed, it signals the wait fd, or sends on the
// Notify channel (once per arming).
func (rx *rxHalf) wake() {
	if rx.armed.Load() == 0 || !rx.armed.CompareAndSwap(1, 0) {
		return
	}
	if ch := rx.notify.Load(); ch != nil {
		select {
		case *ch <- struct{}{}:
		default:
		}
		return
	}
	rx.efdMu.Lock()
	if rx.wfd >= 0 {
		wakefd.Signal(rx.wfd)
	}
	rx.efdMu.Unlock()
	rx.kicked.Store(true)
}

// closeWaitFD wakes any poller of the wait fd (or waiter on the Notify
// channel) and closes it.
func (rx *rxHalf) closeWaitFD() {
	if ch := rx.notify.Load(); ch != nil {
		select {
		case *ch <- struct{}{}:
		default:
		}
	}
	rx.efdMu.Lock()
	defer rx.efdMu.Unlock()
	if rx.rfd < 0 {
		return
	}
	wakefd.Signal(rx.wfd)
	_ = wakefd.Close(rx.rfd, rx.wfd)
	rx.rfd, rx.wfd = -1, -1
}
