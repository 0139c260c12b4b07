package memport

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/wakefd"
)

// Defaults for Config's zero fields.
const (
	DefaultMTU      = 1500
	DefaultRingSize = 512 // descriptors per ring
	// maxQueues bounds Config.Queues (a TX burst tracks the rings it
	// touched in a 64-bit mask).
	maxQueues = 64
	// maxPoolBytes bounds a pool's memory (PoolFrames * FrameSize, 16
	// GiB): a Go heap allocation beyond what the machine has is a fatal
	// error, not one NewPair could return.
	maxPoolBytes = 16 << 30
)

// Config describes a pair of ports. The zero value is usable.
type Config struct {
	// Name is the pair's name; the ports are Name+"a" and Name+"b".
	// Default "mem".
	Name string
	// MACA and MACB are the ports' hardware addresses. Default
	// 02:00:00:00:00:0a and 02:00:00:00:00:0b (locally administered).
	MACA, MACB net.HardwareAddr
	// MTU is the largest L3 packet in bytes (default 1500). Frames may be
	// MTU + 14 bytes long, or MTU + 18 with an 802.1Q tag.
	MTU int
	// Queues is the number of queues of each port, 1 to 64 (default 1).
	Queues int
	// RingSize is the number of descriptors of each ring, a power of 2
	// (default 512). There is one ring from every TX queue of a port to
	// every RX queue of its peer.
	RingSize int
	// FrameSize is the size of a frame buffer in bytes, a power of 2
	// (default dataplane.DefaultFrameSize).
	FrameSize int
	// Headroom is the data offset of received and allocated frames
	// (default dataplane.DefaultHeadroom).
	Headroom int
	// PoolFrames is the number of frame buffers of each port's pool, or of
	// the shared pool. The default leaves room for full rings and caches:
	// max(4096, 2 * Queues * (Queues * RingSize + 4 * dataplane.CacheBatch))
	// per port, twice that for a shared pool. Every queue half keeps a
	// private cache of up to 4 * dataplane.CacheBatch buffers (of its own
	// pool, and a TX half one of the peer's pool too), so a pool much
	// smaller than the default can run dry while buffers sit in caches:
	// Alloc comes up short and copies are dropped (DropNoBuffer). A pool
	// holds at most 16 GiB (PoolFrames * FrameSize): NewPair refuses more.
	PoolFrames int
	// SharedPool makes the two ports share one pool, so that frames cross
	// the wire and move from one port's RX to the other's TX without a copy.
	SharedPool bool
	// PoolA and PoolB, when set, are the pools of port a and port b
	// (instead of new ones; SharedPool is then ignored for that port). A
	// gateway's LAN and WAN ports of two different pairs can so share one
	// pool, like two AF_XDP ports on one UMEM. The frame size and headroom
	// of a given pool win over FrameSize and Headroom; NewPair refuses a
	// pool whose frames do not hold its headroom, MTU + 18 bytes and
	// dataplane.MinTailroom.
	PoolA, PoolB *dataplane.Pool
}

func (c *Config) setDefaults() error {
	if c.Name == "" {
		c.Name = "mem"
	}
	if c.MACA == nil {
		c.MACA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	}
	if c.MACB == nil {
		c.MACB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.FrameSize == 0 {
		c.FrameSize = dataplane.DefaultFrameSize
	}
	if c.Headroom == 0 {
		c.Headroom = dataplane.DefaultHeadroom
	}
	if c.PoolFrames < 0 {
		return fmt.Errorf("memport: PoolFrames %d is negative", c.PoolFrames)
	}
	if c.PoolFrames == 0 {
		c.PoolFrames = max(4096, 2*c.Queues*(c.Queues*c.RingSize+4*dataplane.CacheBatch))
		if c.SharedPool {
			c.PoolFrames *= 2
		}
	}
	makesPool := c.PoolA == nil || c.PoolB == nil
	switch {
	case len(c.MACA) != 6 || len(c.MACB) != 6:
		return fmt.Errorf("memport: MAC addresses %v, %v are not 6 bytes", c.MACA, c.MACB)
	case c.Queues < 1 || c.Queues > maxQueues:
		return fmt.Errorf("memport: %d queues not in [1, %d]", c.Queues, maxQueues)
	case c.RingSize < 1 || c.RingSize > 1<<24 || c.RingSize&(c.RingSize-1) != 0:
		return fmt.Errorf("memport: ring size %d is not a power of 2 in [1, 2^24]", c.RingSize)
	case makesPool && (c.FrameSize < 2048 || c.FrameSize&(c.FrameSize-1) != 0):
		return fmt.Errorf("memport: FrameSize %d is not a power of 2 of at least 2048", c.FrameSize)
	case makesPool && (c.Headroom < dataplane.MinHeadroom || c.Headroom > c.FrameSize-dataplane.MinDataRoom):
		return fmt.Errorf("memport: Headroom %d not in [%d, FrameSize %d - %d]", c.Headroom, dataplane.MinHeadroom, c.FrameSize, dataplane.MinDataRoom)
	case makesPool && c.PoolFrames > maxPoolBytes/c.FrameSize:
		return fmt.Errorf("memport: a pool of %d frames of %d bytes is more than %d GiB (PoolFrames, by default from Queues %d and RingSize %d): set fewer",
			c.PoolFrames, c.FrameSize, maxPoolBytes>>30, c.Queues, c.RingSize)
	case c.MTU < 68:
		return fmt.Errorf("memport: MTU %d below the IPv4 minimum of 68", c.MTU)
	case c.Headroom+c.MTU+ethHeaderLen+vlanTagLen+dataplane.MinTailroom > c.FrameSize:
		need := c.Headroom + c.MTU + ethHeaderLen + vlanTagLen + dataplane.MinTailroom
		fit := 2048
		for fit < need {
			fit *= 2
		}
		return fmt.Errorf("memport: MTU %d does not fit a %d-byte frame with %d bytes of headroom, %d of Ethernet header and 802.1Q tag and %d of tailroom (%d bytes): "+
			"set FrameSize to %d, or the MTU to at most %d",
			c.MTU, c.FrameSize, c.Headroom, ethHeaderLen+vlanTagLen, dataplane.MinTailroom, need, fit, c.FrameSize-(need-c.MTU))
	}
	return nil
}

// Port is one end of a memport pair. It implements dataplane.Port and
// dataplane.Accounter. Its methods are safe for concurrent use; each queue
// half has one owner goroutine at a time.
type Port struct {
	name   string
	mac    net.HardwareAddr
	mtu    int
	maxLen uint32 // MTU + Ethernet header, in bytes
	pool   *dataplane.Pool
	peer   *Port
	queues []*Queue

	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ dataplane.Port      = (*Port)(nil)
	_ dataplane.Accounter = (*Port)(nil)
)

// NewPair returns two ports joined by a virtual wire. Close each port when
// done; the pools' memory is garbage-collected once no frame refers to it.
func NewPair(cfg Config) (a, b *Port, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, nil, err
	}
	newPool := func() (*dataplane.Pool, error) {
		p, err := dataplane.NewPool(dataplane.AllocMemory(cfg.PoolFrames*cfg.FrameSize), cfg.FrameSize, cfg.Headroom)
		if err != nil {
			return nil, fmt.Errorf("memport: create pool: %w", err)
		}
		return p, nil
	}
	pa, pb := cfg.PoolA, cfg.PoolB
	if pa == nil {
		if pa, err = newPool(); err != nil {
			return nil, nil, err
		}
	}
	if pb == nil {
		pb = pa
		if !cfg.SharedPool || cfg.PoolA != nil {
			if pb, err = newPool(); err != nil {
				return nil, nil, err
			}
		}
	}
	// A given pool's frame size and headroom win over the Config's, so
	// the MTU check of setDefaults does not cover it: a frame longer than
	// its buffers hold would be copied into one short, received as a bad
	// descriptor and its buffer lost.
	for _, x := range []struct {
		port string
		pool *dataplane.Pool
	}{{"a", pa}, {"b", pb}} {
		need := x.pool.Headroom() + cfg.MTU + ethHeaderLen + vlanTagLen + dataplane.MinTailroom
		if need > x.pool.FrameSize() {
			return nil, nil, fmt.Errorf("memport: MTU %d does not fit the %d-byte frames of port %s's pool with its %d bytes of headroom, %d of Ethernet header and 802.1Q tag and %d of tailroom (%d bytes): "+
				"give a pool of larger frames, or set the MTU to at most %d",
				cfg.MTU, x.pool.FrameSize(), x.port, x.pool.Headroom(), ethHeaderLen+vlanTagLen, dataplane.MinTailroom, need, x.pool.FrameSize()-(need-cfg.MTU))
		}
	}
	a = newPort(cfg.Name+"a", cfg.MACA, cfg.MTU, pa)
	b = newPort(cfg.Name+"b", cfg.MACB, cfg.MTU, pb)
	a.peer, b.peer = b, a
	n := cfg.Queues
	for _, p := range []*Port{a, b} {
		p.queues = make([]*Queue, n)
		for i := range n {
			q := &Queue{port: p, index: i}
			q.rx.rfd, q.rx.wfd = -1, -1
			q.rx.q, q.tx.q = q, q
			q.ownRX, q.ownTX = dataplane.NewCache(p.pool), dataplane.NewCache(p.pool)
			q.rx.cache, q.tx.own = q.ownRX, q.ownTX
			q.tx.out = make([]producer, n)
			p.queues[i] = q
		}
	}
	for _, p := range []*Port{a, b} {
		for _, q := range p.queues {
			q.tx.peerCache = q.tx.own
			if p.peer.pool != p.pool {
				q.tx.peerCache = dataplane.NewCache(p.peer.pool)
			}
			q.ownPeer = q.tx.peerCache
		}
	}
	// ring[i][k]: from TX queue i of one port to RX queue k of the other.
	for _, p := range []*Port{a, b} {
		for _, tq := range p.queues {
			for k, rq := range p.peer.queues {
				r := newRing(cfg.RingSize, 0)
				tq.tx.out[k] = newProducer(r)
				rq.rx.in = append(rq.rx.in, newConsumer(r))
			}
		}
	}
	for _, p := range []*Port{a, b} {
		for _, q := range p.queues {
			r, w, err := wakefd.New()
			if err != nil {
				a.Close()
				b.Close()
				return nil, nil, fmt.Errorf("memport: create wait fd: %w", err)
			}
			q.rx.rfd, q.rx.wfd = r, w
		}
	}
	return a, b, nil
}

func newPort(name string, mac net.HardwareAddr, mtu int, pool *dataplane.Pool) *Port {
	return &Port{
		name:   name,
		mac:    append(net.HardwareAddr(nil), mac...),
		mtu:    mtu,
		maxLen: uint32(mtu + ethHeaderLen),
		pool:   pool,
	}
}

// Name is the port's name (Config.Name + "a" or "b").
func (p *Port) Name() string { return p.name }

// MAC is the port's hardware address. The caller must not modify it.
func (p *Port) MAC() net.HardwareAddr { return p.mac }

// MTU is the largest L3 packet in bytes.
func (p *Port) MTU() int { return p.mtu }

// NumQueues is the number of queues.
func (p *Port) NumQueues() int { return len(p.queues) }

// Queue returns queue i, 0 <= i < NumQueues; it panics otherwise, like a
// slice index.
func (p *Port) Queue(i int) dataplane.Queue { return p.queues[i] }

// Pool is the port's pool (shared with the peer under Config.SharedPool).
func (p *Port) Pool() *dataplane.Pool { return p.pool }

// Peer is the other end of the wire.
func (p *Port) Peer() *Port { return p.peer }

// Stats adds up the counters of every queue.
func (p *Port) Stats() dataplane.Stats {
	var s dataplane.Stats
	for _, q := range p.queues {
		s.Add(q.Stats())
	}
	return s
}

// Close stops the port: afterwards its halves' methods return 0 (Arm
// returns false and WaitFD -1), and the peer's transmissions to it are
// dropped and counted (DropClosed). Frames held by callers stay valid and
// may still be freed. Remove the port's RX halves from every Waiter before
// Close: their wait fds are closed. Close is idempotent and returns nil.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		for _, q := range p.queues {
			q.rx.closeWaitFD()
		}
	})
	return nil
}

// SameAddr, as the address of CorruptNextDescriptor, keeps the frame's own
// address and replaces only the length.
const SameAddr = ^uint64(0)

// CorruptNextDescriptor is a test hook for bad input: the next frame that TX
// queue queue of p transmits goes on the ring as the descriptor (addr,
// length) instead of its own, as if the ring's memory had been corrupted.
// addr is an offset in the peer's pool, or SameAddr for the frame's own. If
// the descriptor is invalid (outside the pool or crossing a chunk), the
// frame's buffer is freed so that accounting stays whole; if it is valid and
// names another buffer, that buffer will be received as well as wherever
// else it is, so accounting tests must not do that. Safe for concurrent use.
func (p *Port) CorruptNextDescriptor(queue int, addr uint64, length uint32) error {
	if queue < 0 || queue >= len(p.queues) {
		return fmt.Errorf("corrupt descriptor on queue %d of %s: %w", queue, p.name, dataplane.ErrNoSuchQueue)
	}
	p.queues[queue].tx.corrupt.Store(&desc{addr: addr, len: length})
	return nil
}

// Pools returns the pools whose buffers the port holds: its own, and its
// peer's when they differ (a TX half keeps a cache of the peer's buffers to
// copy into).
func (p *Port) Pools() []*dataplane.Pool {
	if p.peer.pool == p.pool {
		return []*dataplane.Pool{p.pool}
	}
	return []*dataplane.Pool{p.pool, p.peer.pool}
}

// AccountBuffers reports every buffer in the port's caches and in the rings
// into its RX queues (see dataplane.Accounter). Only while no goroutine uses
// the port's halves or the peer's TX halves.
func (p *Port) AccountBuffers(fn func(pool *dataplane.Pool, chunk uint64, place string)) {
	var chunks []uint64
	report := func(c *dataplane.Cache, place string) {
		chunks = c.AppendChunks(chunks[:0])
		for _, ch := range chunks {
			fn(c.Pool(), ch, place)
		}
	}
	for k, q := range p.queues {
		// Caches given with UseCache are their owners' to report.
		if q.rx.cache == q.ownRX {
			report(q.rx.cache, fmt.Sprintf("%s rx cache q%d", p.name, k))
		}
		if q.tx.own == q.ownTX {
			report(q.tx.own, fmt.Sprintf("%s tx cache q%d", p.name, k))
		}
		if q.tx.peerCache != q.tx.own && q.tx.peerCache == q.ownPeer {
			report(q.tx.peerCache, fmt.Sprintf("%s tx peer cache q%d", p.name, k))
		}
		for i := range q.rx.in {
			r := q.rx.in[i].r
			place := fmt.Sprintf("%s rx ring q%d from q%d", p.name, k, i)
			for idx := r.cons.Load(); idx != r.prod.Load(); idx++ {
				d := r.desc[idx&r.mask]
				if descOK(p.pool, d) { // Receive drops the rest without a free
					fn(p.pool, d.addr&^uint64(p.pool.FrameSize()-1), place)
				}
			}
		}
	}
}

// Queue is one queue of a memport Port. It implements dataplane.Queue.
type Queue struct {
	port  *Port
	index int
	rx    rxHalf
	tx    txHalf
	// The caches the queue made (rx.cache, tx.own and tx.peerCache start
	// as these; UseCache may replace them with a caller's).
	ownRX, ownTX, ownPeer *dataplane.Cache
}

var _ dataplane.CacheSharer = (*Queue)(nil)

// Cache returns the cache the queue's RX half keeps free buffers of the
// port's pool in (dataplane.CacheSharer).
func (q *Queue) Cache() *dataplane.Cache { return q.rx.cache }

// UseCache makes the queue's halves keep free buffers of c's pool in c
// (dataplane.CacheSharer): the RX half and the TX half's own cache when c
// is of the port's pool, the TX half's cache of the peer's buffers when c
// is of the peer's (different) pool. The queue's own caches it replaces are
// drained into their pool. It reports whether any half took c.
func (q *Queue) UseCache(c *dataplane.Cache) bool {
	used := false
	if c.Pool() == q.port.pool {
		// Only the queue's own caches are drained: one given earlier is
		// its owner's.
		for _, old := range []*dataplane.Cache{q.rx.cache, q.tx.own} {
			if old != c && (old == q.ownRX || old == q.ownTX) {
				old.Drain()
			}
		}
		same := q.tx.peerCache == q.tx.own
		q.rx.cache, q.tx.own = c, c
		if same {
			q.tx.peerCache = c
		}
		used = true
	}
	if c.Pool() == q.port.peer.pool && q.port.peer.pool != q.port.pool {
		if q.tx.peerCache != c && q.tx.peerCache == q.ownPeer {
			q.tx.peerCache.Drain()
		}
		q.tx.peerCache = c
		used = true
	}
	return used
}

// Index is the queue's index on its port.
func (q *Queue) Index() int { return q.index }

// Port is the queue's port.
func (q *Queue) Port() dataplane.Port { return q.port }

// RX is the receive half.
func (q *Queue) RX() dataplane.RX { return &q.rx }

// TX is the transmit half.
func (q *Queue) TX() dataplane.TX { return &q.tx }

// Stats returns a snapshot of the queue's counters.
func (q *Queue) Stats() dataplane.Stats {
	var s dataplane.Stats
	s.RXPackets = q.rx.stats.packets.Load()
	s.RXBytes = q.rx.stats.bytes.Load()
	s.TXPackets = q.tx.stats.packets.Load()
	s.TXBytes = q.tx.stats.bytes.Load()
	s.Copies = q.tx.stats.copies.Load()
	s.RingFull = q.tx.stats.ringFull.Load()
	q.rx.stats.drops.LoadAdd(&s.Drops)
	q.tx.stats.drops.LoadAdd(&s.Drops)
	return s
}

// counters are one half's counters, written by its owner once per burst and
// read by Stats from any goroutine. Only the owner writes, so an update is a
// load and a store (add), not a locked read-modify-write.
type counters struct {
	packets, bytes   atomic.Uint64
	copies, ringFull atomic.Uint64
	drops            dataplane.AtomicDropCounts
}

// add adds n to a counter that only the caller writes.
func add(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }
