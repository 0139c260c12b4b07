package fastpath

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// Packet capture. Once traffic is redirected to AF_XDP sockets, tcpdump on
// the host no longer sees it; a Capture attached with Engine.SetCapture sees
// the frames the workers receive and transmit instead.
//
// Cost: while no Capture is attached, a worker pays one atomic pointer load
// per burst and per hook point (receive on LAN, receive on WAN, transmit).
// While one is attached, a worker copies each matching frame (up to
// SnapLen bytes) into its own bounded ring; the ring never blocks the worker:
// a frame that finds it full is counted in CaptureStats.Dropped. The reader
// (one goroutine) takes frames out with ReadFrame.

// CapturePort selects the port(s) a Capture watches.
type CapturePort uint8

// Ports.
const (
	CaptureAnyPort CapturePort = 0
	CaptureLAN     CapturePort = 1 // the plaintext side
	CaptureWAN     CapturePort = 2 // the encrypted side
)

func (p CapturePort) String() string {
	switch p {
	case CaptureLAN:
		return "lan"
	case CaptureWAN:
		return "wan"
	}
	return "any"
}

// CaptureDir selects the direction(s) a Capture watches.
type CaptureDir uint8

// Directions, as seen by the gateway.
const (
	CaptureAnyDir CaptureDir = 0
	CaptureRX     CaptureDir = 1 // frames received from the port
	CaptureTX     CaptureDir = 2 // frames handed to the port's TX ring
)

func (d CaptureDir) String() string {
	switch d {
	case CaptureRX:
		return "rx"
	case CaptureTX:
		return "tx"
	}
	return "any"
}

// Defaults of CaptureConfig.
const (
	// DefaultCaptureSnapLen is the default number of bytes kept per frame:
	// a 1500-byte MTU frame with its Ethernet header and an 802.1Q tag.
	DefaultCaptureSnapLen = 1518
	// DefaultCaptureRing is the default ring length per worker, in frames
	// (power of 2).
	DefaultCaptureRing = 1024
	// MaxCaptureSnapLen bounds SnapLen (a frame of the largest IP packet).
	MaxCaptureSnapLen = 65535 + 18
)

// CaptureFilter chooses the frames a Capture keeps. The zero value keeps
// every frame. Fields are matched against the frame's outermost IP and
// UDP/TCP headers (header.Parse): on the WAN that is the encrypted
// packet's outer header, as a tcpdump on the wire would see it. A frame
// that does not parse matches only a filter without Proto, Host and L4Port.
type CaptureFilter struct {
	Port CapturePort
	Dir  CaptureDir
	// Proto is the IP protocol number (17 UDP, 6 TCP, 1 ICMP, 58 ICMPv6);
	// 0 matches any.
	Proto uint8
	// Host matches frames whose IP source or destination is Host; the
	// zero Addr matches any.
	Host netip.Addr
	// L4Port matches UDP or TCP frames whose source or destination port is
	// L4Port; 0 matches any.
	L4Port uint16
}

// needsParse reports whether matching needs the headers.
func (f *CaptureFilter) needsParse() bool {
	return f.Proto != 0 || f.Host.IsValid() || f.L4Port != 0
}

// match reports whether a parsed frame matches (r is Parse's result).
func (f *CaptureFilter) match(r header.Reason, p *header.Packet) bool {
	if r != header.OK && r != header.ReasonFragment {
		return false
	}
	if f.Proto != 0 && p.Proto != f.Proto {
		return false
	}
	if f.Host.IsValid() && p.Src != f.Host && p.Dst != f.Host {
		return false
	}
	if f.L4Port != 0 && p.SrcPort != f.L4Port && p.DstPort != f.L4Port {
		return false
	}
	return true
}

// CaptureConfig configures a Capture.
type CaptureConfig struct {
	Filter CaptureFilter
	// SnapLen is the most bytes kept of a frame (default
	// DefaultCaptureSnapLen, at most MaxCaptureSnapLen).
	SnapLen int
	// Ring is the ring length per worker in frames, rounded up to a power
	// of 2 (default DefaultCaptureRing). Memory: Ring × SnapLen bytes per
	// worker.
	Ring int
}

// CapturedFrame is one frame taken out of a Capture by ReadFrame.
type CapturedFrame struct {
	// Time is when the worker received or transmitted the frame's burst
	// (wall clock, one reading per burst).
	Time  time.Time
	Queue int
	Port  CapturePort // CaptureLAN or CaptureWAN
	Dir   CaptureDir  // CaptureRX or CaptureTX
	// OrigLen is the frame's length on the wire, in bytes; len(Data) is
	// at most the Capture's SnapLen.
	OrigLen int
	// Data is the captured bytes, starting at the Ethernet header. It is
	// ReadFrame's buffer: valid until the next ReadFrame call.
	Data []byte
}

// CaptureStats counts a Capture's frames.
type CaptureStats struct {
	Captured uint64 // copied into a ring
	Dropped  uint64 // matched, but the worker's ring was full
}

// captureSlot is one ring entry. Its buffer is allocated once.
type captureSlot struct {
	buf     []byte // cap = SnapLen
	n       int
	origLen int
	time    int64
	port    CapturePort
	dir     CaptureDir
}

// captureRing is a single-producer (the worker), single-consumer (the
// reader) ring. The producer publishes head once per burst and the consumer
// publishes tail once per frame; Go's sync/atomic operations are
// sequentially consistent (The Go Memory Model, "Atomic Values"), so the
// slot writes before a head store are visible to the reader that loads it,
// and a slot is not rewritten before the reader's tail store says so.
type captureRing struct {
	slots    []captureSlot
	mask     uint64
	head     atomic.Uint64 // written by the worker
	tail     atomic.Uint64 // written by the reader
	captured atomic.Uint64
	dropped  atomic.Uint64
	pkt      header.Packet // worker-owned parse scratch
	_        [64]byte      // keep the next ring's counters off this line
}

// Capture is a packet capture on an Engine's workers. Make one with
// NewCapture, attach it with Engine.SetCapture, read it with ReadFrame from
// one goroutine, and detach it with Engine.SetCapture(nil). A Capture is
// attached to at most one Engine, once.
type Capture struct {
	filter   CaptureFilter
	snapLen  int
	ringLen  int
	rings    []captureRing
	attached atomic.Bool
	wake     chan struct{} // capacity 1: a burst was published
	next     int           // reader: ring to look at first
	// detached is closed (once, detach) when the engine lets the capture
	// go: SetCapture with another or nil, or the engine's Close.
	detached   chan struct{}
	detachOnce sync.Once
}

// ErrCaptureDetached is ReadFrame's error once the capture is detached
// (SetCapture with another capture or nil, Engine.Close) and the frames
// published before are read. (A worker in the middle of a burst may still
// publish a few after the detach, counted in Captured; they are not read.)
var ErrCaptureDetached = errors.New("fastpath: capture detached")

// detach tells the reader that no more frames come.
func (c *Capture) detach() { c.detachOnce.Do(func() { close(c.detached) }) }

// NewCapture makes a Capture. Its rings are allocated when it is attached.
func NewCapture(cfg CaptureConfig) (*Capture, error) {
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultCaptureSnapLen
	}
	if cfg.SnapLen < 0 || cfg.SnapLen > MaxCaptureSnapLen {
		return nil, errors.New("fastpath: capture snap length out of range 1-65553")
	}
	if cfg.Ring == 0 {
		cfg.Ring = DefaultCaptureRing
	}
	if cfg.Ring < 0 || cfg.Ring > 1<<20 {
		return nil, errors.New("fastpath: capture ring length out of range 1-1048576")
	}
	n := 1
	for n < cfg.Ring {
		n <<= 1
	}
	return &Capture{filter: cfg.Filter, snapLen: cfg.SnapLen, ringLen: n, wake: make(chan struct{}, 1), detached: make(chan struct{})}, nil
}

// SetCapture attaches c to the engine's workers, replacing any capture
// attached before; nil detaches. Workers see the change at their next
// burst. It returns an error if c was attached before.
func (e *Engine) SetCapture(c *Capture) error {
	if c != nil {
		if !c.attached.CompareAndSwap(false, true) {
			return errors.New("fastpath: capture already attached")
		}
		c.rings = make([]captureRing, len(e.workers))
		for i := range c.rings {
			r := &c.rings[i]
			r.slots = make([]captureSlot, c.ringLen)
			r.mask = uint64(c.ringLen - 1)
			mem := make([]byte, c.ringLen*c.snapLen)
			for j := range r.slots {
				r.slots[j].buf = mem[j*c.snapLen : (j+1)*c.snapLen : (j+1)*c.snapLen]
			}
		}
	}
	old := e.workers[0].capture.Load()
	for _, w := range e.workers {
		w.capture.Store(c)
	}
	if old != nil && old != c {
		old.detach()
	}
	return nil
}

// Stats returns the counters summed over the workers.
func (c *Capture) Stats() CaptureStats {
	var s CaptureStats
	for i := range c.rings {
		s.Captured += c.rings[i].captured.Load()
		s.Dropped += c.rings[i].dropped.Load()
	}
	return s
}

// put copies the matching frames of one burst into worker q's ring. It is
// called by the worker that owns ring q, with frames it owns; it does not
// keep them, never blocks and does not allocate.
func (c *Capture) put(q int, port CapturePort, dir CaptureDir, frames []dataplane.Frame) {
	f := &c.filter
	if (f.Port != CaptureAnyPort && f.Port != port) || (f.Dir != CaptureAnyDir && f.Dir != dir) || len(frames) == 0 {
		return
	}
	if q >= len(c.rings) {
		return
	}
	r := &c.rings[q]
	head, tail := r.head.Load(), r.tail.Load()
	now := time.Now().UnixNano()
	parse := f.needsParse()
	var put, dropped uint64
	for i := range frames {
		d := frames[i].Data()
		if parse && !f.match(header.Parse(d, &r.pkt), &r.pkt) {
			continue
		}
		if head-tail >= uint64(len(r.slots)) {
			dropped++
			continue
		}
		s := &r.slots[head&r.mask]
		s.n = copy(s.buf[:cap(s.buf)], d)
		s.origLen, s.time, s.port, s.dir = len(d), now, port, dir
		head++
		put++
	}
	if put > 0 {
		r.head.Store(head)
		r.captured.Add(put)
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	if dropped > 0 {
		r.dropped.Add(dropped)
	}
}

// TryReadFrame copies the next captured frame into fr, as ReadFrame does,
// if one is waiting, and reports whether it did; it never blocks. It must be
// called from the goroutine that calls ReadFrame.
func (c *Capture) TryReadFrame(fr *CapturedFrame) bool {
	for k := range c.rings {
		qi := (c.next + k) % len(c.rings)
		r := &c.rings[qi]
		tail := r.tail.Load()
		if tail == r.head.Load() {
			continue
		}
		s := &r.slots[tail&r.mask]
		fr.Data = append(fr.Data[:0], s.buf[:s.n]...)
		fr.Time = time.Unix(0, s.time)
		fr.Queue, fr.Port, fr.Dir, fr.OrigLen = qi, s.port, s.dir, s.origLen
		r.tail.Store(tail + 1)
		c.next = qi + 1
		return true
	}
	return false
}

// ReadFrame waits for the next captured frame and copies it into fr
// (fr.Data is reused when its capacity allows). Frames of one worker come
// in order; frames of different workers are interleaved in no particular
// order (sort by Time if needed). It returns ctx's error when ctx ends
// first, and ErrCaptureDetached once the capture is detached and the
// frames published before are read. ReadFrame must be called from one goroutine at a time.
func (c *Capture) ReadFrame(ctx context.Context, fr *CapturedFrame) error {
	if len(c.rings) == 0 {
		return errors.New("fastpath: capture not attached")
	}
	for {
		if c.TryReadFrame(fr) {
			return nil
		}
		// Idle: wait for a burst. A worker signals after it publishes
		// head, and the signal stays buffered, so one published while this
		// goroutine was looking at the rings is not lost.
		select {
		case <-c.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.detached:
			if c.TryReadFrame(fr) { // published before the detach
				return nil
			}
			return ErrCaptureDetached
		}
	}
}
