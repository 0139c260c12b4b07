package dataplane

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/wgpio/wgpio/internal/counts"
)

// Sizes shared by every backend.
const (
	// DefaultFrameSize is the size in bytes of one frame buffer (one UMEM
	// chunk on AF_XDP): headroom + packet + tailroom. Power of 2.
	DefaultFrameSize = 4096

	// MinHeadroom is the least number of bytes a received or allocated frame
	// has in front of its data, for outer headers prepended in place
	// (Ethernet 14 + 802.1Q 4 + IPv6 40 + UDP 8 + WireGuard 16 = 82).
	MinHeadroom = 128

	// DefaultHeadroom is the headroom the backends leave by default.
	DefaultHeadroom = 256

	// MinTailroom is the least number of bytes a frame of MTU-sized
	// data has behind its data, for padding and an authentication tag.
	MinTailroom = 64

	// MaxBurst is the largest burst a backend is tuned for. Callers may pass
	// larger slices; backends process them in pieces of at most MaxBurst.
	MaxBurst = 256
)

// Errors returned by backends. Backends wrap them with the interface name
// and the fix; test with errors.Is. (A pool that runs dry is no error of a
// port: Alloc returns fewer frames; CopyFrame and SendCopy, which report
// errors, return ErrNoFreeFrame.)
var (
	ErrClosed       = errors.New("dataplane: port closed")
	ErrNoSuchQueue  = errors.New("dataplane: queue index out of range")
	ErrNotSupported = errors.New("dataplane: not supported")
)

// Port is one network interface with NumQueues queues.
//
// The methods of Port are safe for concurrent use. Close stops every queue;
// after Close the halves' methods return 0 and frames still held by callers
// may be freed or dropped (their memory stays valid until they are).
type Port interface {
	// Name is the interface name (e.g. "eth0" or a memport name).
	Name() string
	// MAC is the port's hardware address. The caller must not modify it.
	MAC() net.HardwareAddr
	// MTU is the largest L3 packet in bytes the port sends or receives
	// (not counting the 14-byte Ethernet header or an 802.1Q tag).
	MTU() int
	// NumQueues is the number of queues, at least 1.
	NumQueues() int
	// Queue returns queue i, 0 <= i < NumQueues.
	Queue(i int) Queue
	// Stats adds up the counters of every queue, plus port-wide ones.
	Stats() Stats
	// Close detaches the port from the device and frees every resource.
	Close() error
}

// Queue is one NIC queue: an RX half and a TX half.
type Queue interface {
	// Index is the queue's index on its port.
	Index() int
	// Port is the port the queue belongs to.
	Port() Port
	RX() RX
	TX() TX
	// Stats returns a snapshot of this queue's counters. Safe for
	// concurrent use with the owners of both halves.
	Stats() Stats
}

// RX is the receive half of a queue. It has one owner goroutine at a time.
type RX interface {
	// Receive fills frames[0:n] with received frames and returns n. It never
	// blocks; n is 0 when nothing is waiting. The caller owns the n frames
	// and must give each back exactly once: through Free (of this or any
	// half), Transmit on any TX half, or by keeping it.
	Receive(frames []Frame) int

	// Free returns frames to the pool so that they can be received into
	// again. The caller no longer owns them. Frames of another pool go back
	// to their own pool. Each must be the caller's, given back once: a
	// frame freed twice is handed out twice, undetected except in a
	// build with the tag wgpio_framecheck, which panics
	// (Cache.FreeFrames).
	Free(frames []Frame)

	// WaitFD is a file descriptor that polls readable (POLLIN) while frames
	// may be waiting, for use by Waiter. Arm must be called before blocking.
	WaitFD() int

	// Arm tells the backend that the owner is about to block in poll(2) and
	// returns false if frames are already waiting (so blocking would be
	// wrong). The backend then wakes WaitFD when frames arrive.
	Arm() bool
}

// PortCloser is implemented by the RX halves that can tell that their
// port was closed (memport's and afxdp's): a Waiter's Wait returns an error
// wrapping ErrClosed once one of its halves' ports is closed, so that an
// owner whose port was closed under it stops instead of polling, forever,
// a half that can never receive.
type PortCloser interface {
	// PortClosed reports whether the half's port is closed. Safe for
	// concurrent use.
	PortClosed() bool
}

// TX is the transmit half of a queue. It has one owner goroutine at a time.
type TX interface {
	// Transmit queues frames for sending and returns how many it took: it
	// takes ownership of frames[:n] and the caller keeps frames[n:] (the TX
	// ring was full). A frame of another pool is copied into one of this
	// queue's pool (counted as a copy) and the original freed, unless the
	// pools share memory. Transmit kicks the device at most once. A frame
	// the kernel then drops because the link has no carrier, or its driver
	// drops, is counted as DropLinkDown or DropDriver, not in TXPackets
	// (afxdp in copy mode); so is, as DropLinkDown, a frame transmitted
	// to an interface that is gone (afxdp: deleted, or moved to another
	// namespace). Each frame taken is counted once, in TXPackets or in
	// Drops: afxdp counts it in TXPackets once the kernel takes it off
	// the TX ring, not when Transmit puts it there, so that one waiting
	// there (an interface set down takes none) and lost later is counted
	// only as lost.
	Transmit(frames []Frame) int

	// Alloc fills frames[0:n] with empty frames of this queue's pool, each
	// with DefaultHeadroom in front and length 0, and returns n. The caller
	// owns them. n < len(frames) when the pool is short.
	Alloc(frames []Frame) int

	// Free returns frames to the pool. The caller no longer owns them.
	// Frames of another pool go back to their own pool, as RX.Free's,
	// and each must be the caller's, given back once, as there.
	Free(frames []Frame)

	// Reclaim takes completed frames off the completion ring into the
	// half's free cache and returns how many. Transmit and Alloc call it as
	// needed; an idle owner may call it to let buffers flow back.
	Reclaim() int
}

// Timeout values for Waiter.Wait.
const (
	// Forever blocks until a queue is ready or the doorbell rings.
	Forever time.Duration = -1
)

// Stats is a snapshot of counters. Fields are cumulative since the port was
// opened.
type Stats struct {
	RXPackets uint64 `json:"rx_packets"`
	RXBytes   uint64 `json:"rx_bytes"`
	// TXPackets and TXBytes count the frames transmitted: for afxdp,
	// those the kernel took off a TX ring and did not drop, counted by
	// the queue's owner in Transmit (copy mode: the kick sends them) or
	// Reclaim (zero-copy mode: the driver takes them later). A frame
	// transmitted is counted here or in Drops, never both.
	TXPackets uint64 `json:"tx_packets"`
	TXBytes   uint64 `json:"tx_bytes"`
	// Copies counts frames copied between pools on Transmit.
	Copies uint64 `json:"copies"`
	// RingFull counts Transmit calls that could not take every frame, and
	// refills that found the fill ring full or the pool empty.
	RingFull uint64 `json:"ring_full"`
	// Drops counts dropped frames by reason.
	Drops DropCounts `json:"drops"`
	// Backend holds backend-specific counters by name (e.g. AF_XDP's
	// XDP_STATISTICS and the XDP program's per-CPU counters). May be nil.
	Backend map[string]uint64 `json:"backend"`
}

// LossCounters names the Backend counters that count lost frames, each
// frame once: AF_XDP's XDP_STATISTICS (the kernel dropped a received frame
// for a full RX ring, or for no free frame in the fill ring or a frame too
// long for one, or met a bad descriptor). xsk_rx_fill_ring_empty_descs is
// not one of them: in copy mode (veth, generic XDP) a frame dropped for an
// empty fill ring is counted in xsk_rx_dropped as well (net/xdp/xsk.c,
// __xsk_rcv), and in zero-copy mode the counter counts the driver's failed
// refills, not frames (the NIC drops what finds no buffer and counts it in
// its own statistics, ethtool -S). It stays in Backend, as a cause.
var LossCounters = []string{"xsk_rx_dropped", "xsk_rx_invalid_descs", "xsk_tx_invalid_descs", "xsk_rx_ring_full"}

// Losses lists what s counts as lost, as sorted "name=count" strings for
// the nonzero counters: the drops by reason, the ring-full events
// (tx_calls_ring_full: Transmit calls that could not take every frame,
// whose callers kept and counted the rest, in frames), and the
// LossCounters of Backend. Empty when nothing was lost.
func (s Stats) Losses() []string {
	out := s.Drops.List()
	if s.RingFull > 0 {
		// Calls, not frames: what a call could not take its caller
		// counted (the fast path: the queue's ring_full, in frames).
		out = append(out, fmt.Sprintf("tx_calls_ring_full=%d", s.RingFull))
	}
	for _, k := range LossCounters {
		if n := s.Backend[k]; n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, n))
		}
	}
	sort.Strings(out)
	return out
}

// Add adds o's counters to s.
func (s *Stats) Add(o Stats) {
	s.RXPackets += o.RXPackets
	s.RXBytes += o.RXBytes
	s.TXPackets += o.TXPackets
	s.TXBytes += o.TXBytes
	s.Copies += o.Copies
	s.RingFull += o.RingFull
	s.Drops.Add(&o.Drops)
	if len(o.Backend) > 0 {
		if s.Backend == nil {
			s.Backend = make(map[string]uint64, len(o.Backend))
		}
		for k, v := range o.Backend {
			s.Backend[k] += v
		}
	}
}

// DropReason says why a backend dropped a frame.
type DropReason uint8

// Drop reasons counted by the backends.
const (
	// DropRunt: a received frame shorter than an Ethernet header (14 bytes).
	DropRunt DropReason = iota
	// DropTooLong: a frame longer than the frame buffer can hold, or than
	// MTU + Ethernet header on transmit.
	DropTooLong
	// DropBadDescriptor: a descriptor from a ring with an address or length
	// outside the pool.
	DropBadDescriptor
	// DropNoBuffer: a frame lost because no buffer was free (memport RX).
	DropNoBuffer
	// DropClosed: a frame handed to a closed port, or left unsent on a
	// TX ring when the port closed (afxdp: an interface set down holds
	// the frames given to it).
	DropClosed
	// DropRingFull: a frame the peer's RX ring had no room for (memport).
	DropRingFull
	// DropLinkDown: a frame put on the TX ring that the kernel dropped
	// because the interface had no carrier (its other end or cable down)
	// or was down (afxdp in copy mode: sendto's EBUSY, each a frame
	// completed unsent and counted in the interface's tx_dropped), or a
	// frame transmitted to an interface that is gone, deleted or moved
	// to another namespace (afxdp: sendto's ENXIO, the socket unbound;
	// the frames on its TX ring then, and every frame after).
	DropLinkDown
	// DropDriver: a frame put on the TX ring that the interface's driver
	// dropped with the link up (afxdp in copy mode: sendto's EBUSY; a
	// veth whose other end's queue was full), counted in the interface's
	// tx_dropped.
	DropDriver

	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{
	DropRunt:          "runt",
	DropTooLong:       "too_long",
	DropBadDescriptor: "bad_descriptor",
	DropNoBuffer:      "no_buffer",
	DropClosed:        "closed",
	DropRingFull:      "ring_full",
	DropLinkDown:      "link_down",
	DropDriver:        "driver_drop",
}

// String returns the reason's name in snake case, as used in metric labels.
func (r DropReason) String() string { return counts.Name(dropReasonNames[:], r) }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// DropCounts counts dropped frames by reason, indexed by DropReason. In
// JSON it is an object of the nonzero counts by reason name
// ({"too_long": 3}), which UnmarshalJSON reads back; an unknown name is an
// error. Its methods (those of internal/counts.Counts, which go doc does
// not list): List gives the nonzero counts as sorted "reason=count"
// strings (print that: %v prints the whole array), Total their sum, Add
// adds another's.
type DropCounts = counts.Counts[DropReason]

// AtomicDropCounts is DropCounts for concurrent writers, for a backend's
// queue halves: Add per drop or per burst, Load for Stats.
type AtomicDropCounts = counts.Atomic[DropReason]

// CacheSharer is implemented by queues whose RX and TX halves keep free
// buffers in a Cache (both backends here). By default each half has its own
// cache, and a frame received on one queue and transmitted on another (a
// gateway's LAN and WAN) travels back to the receiving half through the
// pool's shared free list — with several queues, often to another CPU,
// whose cache must then fetch the buffer's lines. A goroutine that owns
// several queues on one pool (the fast path's worker owns LAN queue i and
// WAN queue i on one UMEM) gives them one cache instead, so that the frame a
// transmit completes is the next the same CPU receives into.
type CacheSharer interface {
	// Cache returns the cache the queue's halves keep free buffers of the
	// queue's own pool in: the queue's own (which the queue accounts, see
	// Accounter, and drains when closed), unless UseCache gave it another.
	Cache() *Cache

	// UseCache makes the queue's halves keep free buffers of c's pool in c
	// (on memport, that includes a transmit half's cache of the peer's pool
	// when the peer has another one) and reports whether any half does.
	// The halves' own caches of that pool are drained into the pool. c
	// stays its owner's: the queue neither accounts nor drains it. Call
	// UseCache before the queue carries traffic; afterwards c may be used
	// only by the goroutine that owns the queue, as with every half.
	UseCache(c *Cache) bool
}

// Accounter is implemented by ports that can say where every buffer of their
// pools is, for tests of descriptor accounting (package
// dataplane/dataplanetest): once traffic has stopped and every frame a
// caller held has been freed, each chunk of each pool must be in exactly one
// place, either on its pool's shared free list or reported once by exactly
// one port.
type Accounter interface {
	// Pools returns the pools the port allocates from or keeps buffers of
	// (its own and, for a port that caches a peer's buffers, the peer's).
	// Two ports may return the same pool.
	Pools() []*Pool

	// AccountBuffers calls fn once for every buffer the port holds outside
	// its pools' shared free lists (which Pool.AppendFree lists): in its
	// halves' caches, in its rings, or in the kernel's hands. place says
	// where in a few words (e.g. "fill ring", "rx cache q0"). It may be
	// called only while no goroutine uses the port's halves.
	AccountBuffers(fn func(p *Pool, chunk uint64, place string))
}
