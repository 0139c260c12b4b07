//go:build linux

package afxdp

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
)

// ethHeaderLen is the Ethernet header length (IEEE 802.3), the shortest
// frame a queue accepts; vlanTagLen is one 802.1Q tag.
const (
	ethHeaderLen = 14
	vlanTagLen   = 4
	// minMTU is the smallest MTU SetMTU takes: every IPv4 link carries
	// 68 bytes (RFC 791 §3.2).
	minMTU = 68
)

// queue is one NIC queue with its socket and two halves.
type queue struct {
	port  *Port
	index int
	sock  *socket
	rx    rxHalf
	tx    txHalf
	// ownRX and ownTX are the caches the queue made; UseCache may give
	// the halves a caller's instead.
	ownRX, ownTX *dataplane.Cache
}

var (
	_ dataplane.Queue       = (*queue)(nil)
	_ dataplane.CacheSharer = (*queue)(nil)
)

// Cache returns the cache the RX half keeps free UMEM chunks in
// (dataplane.CacheSharer).
func (q *queue) Cache() *dataplane.Cache { return q.rx.cache }

// UseCache makes both halves keep free chunks in c if c is a cache of the
// port's UMEM (dataplane.CacheSharer): the fill ring is refilled from it
// and completed transmits return to it. The queue's own caches it replaces
// are drained into the pool. It reports whether c was taken.
func (q *queue) UseCache(c *dataplane.Cache) bool {
	if c.Pool() != q.rx.pool {
		return false
	}
	// Only the queue's own caches are drained: one given earlier is its
	// owner's.
	for _, old := range []*dataplane.Cache{q.rx.cache, q.tx.cache} {
		if old != c && (old == q.ownRX || old == q.ownTX) {
			old.Drain()
		}
	}
	q.rx.cache, q.tx.cache = c, c
	return true
}

func newQueue(p *Port, i int, s *socket) *queue {
	if i == 0 {
		// The UMEM is final by the first queue (Open's fallback to a
		// private one comes before it): Transmit's bound from the
		// interface's MTU and its frames.
		p.setMTU(p.mtu)
	}
	q := &queue{port: p, index: i, sock: s}
	pool := p.umem.pool
	q.ownRX, q.ownTX = dataplane.NewCache(pool), dataplane.NewCache(pool)
	q.rx = rxHalf{q: q, s: s, pool: pool, cache: q.ownRX, memLen: uint64(len(pool.Mem()))}
	q.tx = txHalf{q: q, s: s, pool: pool, cache: q.ownTX, memLen: uint64(len(pool.Mem())),
		copyMode: !p.umem.ZeroCopy(), counted: s.tx.cachedCons}
	q.rx.zerocopy = !q.tx.copyMode
	q.rx.refill() // give the kernel buffers before the program redirects
	return q
}

func (q *queue) Index() int           { return q.index }
func (q *queue) Port() dataplane.Port { return q.port }
func (q *queue) RX() dataplane.RX     { return &q.rx }
func (q *queue) TX() dataplane.TX     { return &q.tx }

// Stats returns the queue's counters and its socket's XDP_STATISTICS.
func (q *queue) Stats() dataplane.Stats {
	var s dataplane.Stats
	r, t := &q.rx.ctr, &q.tx.ctr
	s.RXPackets, s.RXBytes = r.packets.Load(), r.bytes.Load()
	s.TXPackets, s.TXBytes = t.packets.Load(), t.bytes.Load()
	s.Copies = t.copies.Load()
	s.RingFull = r.ringFull.Load() + t.ringFull.Load()
	r.drops.LoadAdd(&s.Drops)
	t.drops.LoadAdd(&s.Drops)
	s.Backend = map[string]uint64{"tx_kicks": t.kicks.Load()}
	q.port.mu.Lock()
	defer q.port.mu.Unlock()
	if q.sock.fd >= 0 {
		if st, err := q.sock.statistics(); err == nil {
			s.Backend["xsk_rx_dropped"] = st.Rx_dropped
			s.Backend["xsk_rx_invalid_descs"] = st.Rx_invalid_descs
			s.Backend["xsk_tx_invalid_descs"] = st.Tx_invalid_descs
			s.Backend["xsk_rx_ring_full"] = st.Rx_ring_full
			s.Backend["xsk_rx_fill_ring_empty_descs"] = st.Rx_fill_ring_empty_descs
			s.Backend["xsk_tx_ring_empty_descs"] = st.Tx_ring_empty_descs
		}
	}
	return s
}

// counters of one half, written by its owner once per burst.
type counters struct {
	packets, bytes atomic.Uint64
	copies         atomic.Uint64
	ringFull       atomic.Uint64
	kicks          atomic.Uint64
	drops          dataplane.AtomicDropCounts
}

// rxHalf owns the RX ring and the fill ring.
type rxHalf struct {
	q        *queue
	s        *socket
	pool     *dataplane.Pool
	cache    *dataplane.Cache
	memLen   uint64
	zerocopy bool
	// busy is 1 while the owner is inside a method; Close waits for 0
	// after setting closed (both sequentially consistent, so one of the
	// two sides sees the other).
	busy atomic.Int32
	ctr  counters
}

func (h *rxHalf) enter() bool {
	h.busy.Store(1)
	if h.q.port.closed.Load() {
		h.busy.Store(0)
		return false
	}
	return true
}

// refill tops up the fill ring from the half's cache. With the pool
// empty it counts a ring-full event and leaves the rest for next time.
func (h *rxHalf) refill() {
	free := h.s.fill.free(uint32(h.s.fill.size))
	var i uint32
	for ; i < free; i++ {
		c, ok := h.cache.Get()
		if !ok {
			h.ctr.ringFull.Add(1)
			break
		}
		*h.s.fill.slot(i) = c
	}
	if i > 0 {
		h.s.fill.submit(i)
		if h.zerocopy && h.s.wakeup && h.s.fill.needWakeup() {
			h.s.kickRX()
		}
	}
}

// Receive fills frames[:n] with received frames (at most
// dataplane.MaxBurst) and returns n; see dataplane.RX. Descriptors the
// kernel should never produce (address outside the UMEM, data past the
// chunk) and runts are dropped and counted, not returned.
func (h *rxHalf) Receive(frames []dataplane.Frame) int {
	if !h.enter() {
		return 0
	}
	want := uint32(min(len(frames), dataplane.MaxBurst))
	n := min(h.s.rx.avail(want), want)
	var got int
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		d := h.s.rx.entry(i)
		addr, l := d.Addr, d.Len
		switch {
		case addr >= h.memLen:
			h.ctr.drops[dataplane.DropBadDescriptor].Add(1)
		case !h.pool.Valid(addr, l):
			h.ctr.drops[dataplane.DropTooLong].Add(1)
			h.cache.Put(addr &^ uint64(h.pool.FrameSize()-1))
		case l < ethHeaderLen:
			h.ctr.drops[dataplane.DropRunt].Add(1)
			h.cache.Put(addr &^ uint64(h.pool.FrameSize()-1))
		default:
			frames[got] = h.pool.Frame(addr, l)
			got++
			bytes += uint64(l)
		}
	}
	if n > 0 {
		h.s.rx.release(n)
	}
	h.refill()
	if got > 0 {
		h.ctr.packets.Add(uint64(got))
		h.ctr.bytes.Add(bytes)
	}
	h.busy.Store(0)
	return got
}

// Free gives frames back (to this half's cache, or their own pool).
func (h *rxHalf) Free(frames []dataplane.Frame) {
	if !h.enter() {
		freeToPools(frames)
		return
	}
	h.cache.FreeFrames(frames)
	h.busy.Store(0)
}

// WaitFD is the socket, which polls readable when the RX ring has frames.
func (h *rxHalf) WaitFD() int { return h.s.fd }

// PortClosed implements dataplane.PortCloser.
func (h *rxHalf) PortClosed() bool { return h.q.port.closed.Load() }

var _ dataplane.PortCloser = (*rxHalf)(nil)

// Arm returns false if frames are waiting. Polling the socket also wakes
// the driver when the fill ring needs it (need_wakeup).
func (h *rxHalf) Arm() bool {
	if !h.enter() {
		return true
	}
	empty := h.s.rx.avail(1) == 0
	h.busy.Store(0)
	return empty
}

// freeToPools returns frames to their pools' shared free lists (after
// Close, when the caches are gone).
func freeToPools(frames []dataplane.Frame) {
	for i := range frames {
		if p := frames[i].Pool(); p != nil {
			p.PutOne(frames[i].Chunk())
		}
	}
}

// txHalf owns the TX ring and the completion ring.
type txHalf struct {
	q        *queue
	s        *socket
	pool     *dataplane.Pool
	cache    *dataplane.Cache
	memLen   uint64
	copyMode bool
	busy     atomic.Int32
	ctr      counters
	// linkAsked is when linkWasUp was asked of the kernel (linkUp).
	linkAsked time.Time
	linkWasUp bool
	// unbound is set once a kick found the socket unbound (unbind): the
	// interface deleted or moved to another namespace.
	unbound bool
	// counted is the TX ring's consumer index up to which its frames are
	// counted (account); lost is how many frames past it a kick counted
	// as dropped (dropped): frames the kernel took off the ring, though
	// it may publish its consumer index past a frame it drops only with
	// a later frame's, or once it finds the ring empty.
	counted uint32
	lost    uint32
}

func (h *txHalf) enter() bool {
	h.busy.Store(1)
	if h.q.port.closed.Load() {
		h.busy.Store(0)
		return false
	}
	return true
}

// Transmit puts frames on the TX ring and kicks the kernel; see
// dataplane.TX. It takes at most dataplane.MaxBurst frames a call. A runt
// or a frame longer than MTU + Ethernet header (+ 4 bytes if it carries an
// 802.1Q tag) is taken, dropped and counted. A frame of another pool is copied into this UMEM
// (counted in Copies) and freed to its own pool.
//
// In copy mode the kernel sends only inside sendto, at most its TX budget
// a call: one kick with XDP_MAX_TX_SKB_BUDGET raised (Linux 6.17), else one
// kick per 32 frames.
//
// Once the interface is gone (deleted or moved to another namespace: the
// kernel unbinds the socket, and the kick's sendto fails with ENXIO), every
// frame is taken, dropped and counted as link_down (unbind): none is sent
// again by this socket. A kick finds it out: each call that submits frames
// in copy mode, the driver's wakeups in zero-copy mode, and a call that
// finds the TX ring full (one sendto a call, whatever the mode), so that
// the frames a vanished device holds are counted as soon as the first
// transmit after it, not as sent.
//
// A frame is counted as sent (TXPackets, TXBytes) once the kernel takes it
// off the TX ring without dropping it (account), not when Transmit puts it
// there: in copy mode within the kick, in zero-copy mode by the first
// Transmit or Reclaim after the driver took it. One that waits there
// (an interface set down takes none) is counted once its fate is known:
// sent, dropped, or link_down if the interface is deleted meanwhile.
func (h *txHalf) Transmit(frames []dataplane.Frame) int {
	if !h.enter() {
		return 0
	}
	if h.unbound {
		n := h.dropGone(frames)
		h.busy.Store(0)
		return n
	}
	h.reclaim()
	want := uint32(min(len(frames), dataplane.MaxBurst))
	room := h.s.tx.free(want)
	if room < want && h.reclaim() > 0 {
		room = h.s.tx.free(want)
	}
	if room == 0 && want > 0 && h.probeFull() {
		n := h.dropGone(frames)
		h.busy.Store(0)
		return n
	}
	h.account(h.s.tx.cachedCons) // before the slots given back are written again
	var i, slots uint32
	maxLen := h.q.port.txMax.Load() // untagged; one 802.1Q tag may add vlanTagLen
	for ; i < want && slots < room; i++ {
		f := &frames[i]
		l := uint32(f.Len())
		if l < ethHeaderLen || l > maxLen && !(l <= maxLen+vlanTagLen && tagged(f.Data())) {
			r := dataplane.DropRunt
			if l >= ethHeaderLen {
				r = dataplane.DropTooLong
			}
			h.ctr.drops[r].Add(1)
			h.cache.FreeFrames(frames[i : i+1])
			continue
		}
		addr := f.Addr()
		if f.Pool() != h.pool {
			nf, ok := h.cache.AllocFrame()
			if !ok || !dataplane.CopyInto(&nf, f) {
				if ok {
					h.cache.Put(nf.Chunk())
				}
				break // the caller keeps frames[i:]
			}
			h.pool.CountCopy(1)
			h.ctr.copies.Add(1)
			f.Pool().PutOne(f.Chunk())
			addr = nf.Addr()
		}
		*h.s.tx.slot(slots) = unix.XDPDesc{Addr: addr, Len: l}
		slots++
	}
	if slots > 0 {
		h.s.tx.submit(slots)
		h.kick(slots)
	}
	h.account(h.s.tx.consumed())
	if int(i) < len(frames) {
		h.ctr.ringFull.Add(1)
	}
	h.busy.Store(0)
	return int(i)
}

// tagged reports whether an Ethernet frame carries an 802.1Q tag.
func tagged(b []byte) bool {
	return len(b) >= ethHeaderLen && b[12] == 0x81 && b[13] == 0x00
}

// kick has the kernel send the n frames just submitted, and counts the
// frames of the ring the kernel drops (dropped, unbind). In
// copy mode a kick that finds the interface without carrier drops one
// frame and fails with EBUSY (socket.kickTX), and the next kick the next
// frame: kick then kicks again until a kick does not fail so or the
// frames on the ring at that moment are all dropped (DropLinkDown), so
// that what is given to a link without carrier is dropped at once and
// counted, as Linux drops what it sends there (its queue discipline is
// deactivated while the carrier is off), instead of waiting on the ring
// to be sent, stale, when the carrier returns; frames the driver refuses
// with the link up likewise, up to n of them (dropped). Dropped frames are
// completed as if sent (Reclaim takes them back), and not counted as sent
// (account). An interface set down (ENETDOWN) takes no frame: they wait
// on the ring (the ring full, Transmit takes fewer), counted when they
// leave it.
func (h *txHalf) kick(n uint32) {
	if !h.copyMode && h.s.wakeup && !h.s.tx.needWakeup() {
		return
	}
	kicks := uint32(1)
	if h.copyMode {
		kicks = (n + uint32(h.s.txBudget) - 1) / uint32(h.s.txBudget)
	}
	for range kicks {
		switch h.s.kickTX() {
		case unix.EBUSY:
			if h.copyMode {
				h.dropped(&kicks, n)
			}
		case unix.ENXIO:
			h.ctr.kicks.Add(uint64(kicks))
			h.unbind()
			return
		}
	}
	h.ctr.kicks.Add(uint64(kicks))
}

// probeFull kicks the kernel once for Transmit, which found the TX ring
// full, and reports whether the socket is unbound (unbind). A driver in
// zero-copy mode with need_wakeup is kicked only when it asks, which a
// device that is gone never does: its ring filled up, without this probe
// the frames would wait there unsent and the caller's be refused as for a
// busy ring, never counted as lost. One sendto a call, only while the
// ring is full; in copy mode through kick, whose drops it counts.
func (h *txHalf) probeFull() bool {
	if h.copyMode {
		h.kick(1)
		return h.unbound
	}
	h.ctr.kicks.Add(1)
	if h.s.kickTX() == unix.ENXIO {
		h.unbind()
	}
	return h.unbound
}

// unbind marks the half unbound, for a kick whose sendto failed with
// ENXIO: the kernel unbinds an AF_XDP socket from an interface that is
// deleted or moved to another namespace (net/xdp/xsk.c, xsk_notifier on
// NETDEV_UNREGISTER), for good (a socket binds once), and then neither
// sends nor completes a frame of its rings. It counts the frames the
// kernel took before as sent (account), and those still on the TX ring as
// link_down, but those a kick counted as dropped already (lost): none of
// them was counted as sent, so that each is counted once. They wait
// there, taken back at Close. Transmit drops every later frame
// (dropGone).
func (h *txHalf) unbind() {
	h.account(h.s.tx.consumed())
	h.unbound = true
	left := h.s.tx.cachedProd - h.counted
	h.ctr.drops[dataplane.DropLinkDown].Add(uint64(left - min(h.lost, left)))
	h.counted, h.lost = h.s.tx.cachedProd, 0
}

// account counts the frames the kernel took off the TX ring since the last
// call, up to its consumer index c: as sent (ctr.packets, ctr.bytes) all
// but lost of them, which a kick counted as dropped. So a frame is
// counted as sent when it leaves the ring, not when Transmit puts it
// there, and one that waits there (an interface set down takes none; a
// zero-copy driver takes frames when it runs) and is then dropped
// (dropped, unbind) or left at Close (queue.release) is counted once. The
// dropped frames are taken to be the last of those counted together, as
// when the link goes down (every frame after the first it drops is
// dropped too): the packets are exact, and the bytes but when a driver
// dropped some of the frames among others it sent. It reads the frames'
// lengths on the ring: Transmit calls it before it writes again a slot
// the kernel gave back. After unbind it does nothing (the rest counted).
func (h *txHalf) account(c uint32) {
	n := c - h.counted
	if h.unbound || int32(n) <= 0 {
		return
	}
	n = min(n, h.s.tx.cachedProd-h.counted) // never more than was put there
	l := min(h.lost, n)
	h.lost -= l
	if sent := n - l; sent > 0 {
		var bytes uint64
		for j := range sent {
			bytes += uint64(h.s.tx.descs[(h.counted+j)&h.s.tx.mask].Len)
		}
		h.ctr.packets.Add(uint64(sent))
		h.ctr.bytes.Add(bytes)
	}
	h.counted += n
}

// dropGone takes up to dataplane.MaxBurst frames for Transmit on an
// unbound half, frees them and counts them as link_down, and returns how
// many it took.
func (h *txHalf) dropGone(frames []dataplane.Frame) int {
	n := min(len(frames), dataplane.MaxBurst)
	h.ctr.drops[dataplane.DropLinkDown].Add(uint64(n))
	h.cache.FreeFrames(frames[:n])
	return n
}

// dropped counts the frame a kick that failed with EBUSY dropped, and the
// frames of the ring dropped after it, also as lost for account; n is the
// number of frames the caller submitted. EBUSY does not say why: the
// interface was down or without carrier, or its driver refused the frame
// (a veth whose other end's queue is full, without a queue discipline in
// front, or a frame longer than the other end's MTU). It asks the kernel
// (linkUp):
// with the link down the frame is DropLinkDown, and so are the ring's
// other frames, kicked out one a kick, counted in kicks, until a kick
// does not fail so; with it up the frame is the driver's drop
// (DropDriver), and it kicks on likewise, at most n − 1 times more (each
// further drop a DropDriver): a kick takes the frames behind a refused
// one only up to the next refused one, so that the frames behind a burst
// the driver refused (50 decrypted packets over the LAN's MTU) waited on
// the ring, neither sent nor counted, one dropped per later kick, while
// the traffic after them waited behind.
func (h *txHalf) dropped(kicks *uint32, n uint32) {
	r, left := dataplane.DropLinkDown, h.s.tx.pending()
	if h.linkUp() {
		r, left = dataplane.DropDriver, min(left, n-1)
	}
	lost := uint32(1)
	for ; left > 0; left-- {
		*kicks++
		if h.s.kickTX() != unix.EBUSY {
			break
		}
		lost++
	}
	h.ctr.drops[r].Add(uint64(lost))
	h.lost += lost
}

// linkRecheck is how long an answer of Port.linkUp is kept (txHalf.linkUp).
const linkRecheck = 100 * time.Millisecond

// linkUp is the port's linkUp, asked of the kernel at most every
// linkRecheck: a link without carrier fails every kick, a busy veth
// many, and a netlink round trip each would cost more than the kicks.
func (h *txHalf) linkUp() bool {
	if now := time.Now(); h.linkAsked.IsZero() || now.Sub(h.linkAsked) >= linkRecheck {
		h.linkAsked, h.linkWasUp = now, h.q.port.linkUp()
	}
	return h.linkWasUp
}

// reclaim moves completed frames from the completion ring to the cache.
func (h *txHalf) reclaim() int {
	n := h.s.comp.avail(uint32(h.s.comp.size))
	if n == 0 {
		return 0
	}
	mask := ^uint64(h.pool.FrameSize() - 1)
	for i := uint32(0); i < n; i++ {
		a := *h.s.comp.entry(i)
		if a >= h.memLen {
			h.ctr.drops[dataplane.DropBadDescriptor].Add(1)
			continue
		}
		h.cache.Put(a & mask)
	}
	h.s.comp.release(n)
	return int(n)
}

// Reclaim takes completed frames back, and counts the frames the kernel
// took off the TX ring since the last call (account); see dataplane.TX.
func (h *txHalf) Reclaim() int {
	if !h.enter() {
		return 0
	}
	h.account(h.s.tx.consumed())
	n := h.reclaim()
	h.busy.Store(0)
	return n
}

// Alloc fills frames with empty frames of the UMEM; see dataplane.TX.
func (h *txHalf) Alloc(frames []dataplane.Frame) int {
	if !h.enter() {
		return 0
	}
	n := 0
	for n < len(frames) {
		f, ok := h.cache.AllocFrame()
		if !ok {
			if h.reclaim() > 0 {
				continue
			}
			break
		}
		frames[n] = f
		n++
	}
	h.busy.Store(0)
	return n
}

// Free gives frames back; see dataplane.TX.
func (h *txHalf) Free(frames []dataplane.Frame) {
	if !h.enter() {
		freeToPools(frames)
		return
	}
	h.cache.FreeFrames(frames)
	h.busy.Store(0)
}

// release runs at Close, after both halves have left: it closes the
// socket, takes back the frames the rings still hold, and unmaps them.
func (q *queue) release() {
	s := q.sock
	s.closeFD()
	pool := q.port.umem.pool
	mask := ^uint64(pool.FrameSize() - 1)
	memLen := uint64(len(pool.Mem()))
	put := func(a uint64) {
		if a < memLen {
			pool.PutOne(a & mask)
		}
	}
	// Unbound now, the kernel touches no ring: what lies between the
	// consumer and producer indexes of each ring is ours again.
	for r, i := s.fill, atomic.LoadUint32(s.fill.cons); i != r.cachedProd; i++ {
		put(r.descs[i&r.mask])
	}
	for r, i := s.rx, q.rx.s.rx.cachedCons; i != atomic.LoadUint32(s.rx.prod); i++ {
		put(r.descs[i&r.mask].Addr)
	}
	// What the kernel took off the TX ring is counted as sent, what it
	// left there (an interface set down holds it) as closed: it is
	// never sent (account; unbind counted it as link_down already).
	t := &q.tx
	t.account(s.tx.consumed())
	if !t.unbound {
		left := s.tx.cachedProd - t.counted
		t.ctr.drops[dataplane.DropClosed].Add(uint64(left - min(t.lost, left)))
	}
	for r, i := s.tx, s.tx.cachedCons; i != r.cachedProd; i++ {
		put(r.descs[i&r.mask].Addr)
	}
	for r, i := s.comp, s.comp.cachedCons; i != atomic.LoadUint32(s.comp.prod); i++ {
		put(r.descs[i&r.mask])
	}
	s.unmap()
	// Caches given with UseCache are their owners' to drain.
	q.ownRX.Drain()
	q.ownTX.Drain()
}
