package fastpath

import (
	"github.com/wgpio/wgpio/chachapoly"
	"math/bits"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// rejectAfterTimeNs is protocol.RejectAfterTime on the engine's clock (ns).
const rejectAfterTimeNs = int64(protocol.RejectAfterTime)

// peerLocal is a worker's private state for one peer, indexed by Peer.ID.
//
// What outbound touches for every peer of a burst is in its first cache
// line (chunks of peerLocals are 64-byte aligned and a peerLocal is a
// multiple of 64 bytes; TestPeerLocalLayout checks it): the grouping, the
// counter lease, the byte counter, the send stamps and, for a peer reached
// from the worker's shared source (outersrc.go), the outer headers'
// destination; a peer reached otherwise has its outer-header template in
// line 1 (all of it an IPv4 one uses; an IPv6 one runs into line 2),
// which outbound reads too. The keypair and endpoint a burst sends with are kept
// apart, per burst (worker.burstKP, burstEP), so that they take no room
// here. The rest (inbound, held frames) follows.
type peerLocal struct {
	peer   *Peer
	tmplEp *Endpoint // the endpoint the outer headers were built for

	// The send counters this worker reserved and has not used yet
	// (outbound.go, lease): granted of them from nonce on, of the keypair
	// whose serial is leaseOf (0: none).
	nonce   uint64
	leaseOf uint64

	// Send stamps and bytes not yet published; dirty: listed in
	// w.dirtyPeers. The stamps are w.stamp's (0: none since the last
	// publish), the bytes a signed count that addTx keeps below 2^30.
	sentAt     uint32
	dataSentAt uint32
	txBytes    int32

	// The outer headers toward tmplEp when the worker's shared source
	// (w.src) writes them: dst, with srcGen the source's generation
	// (w.srcGen); srcGen 0: tmpl writes them (wrap).
	dst header.UDPv4Dst

	// batch grouping (outbound): the burst's frames for the peer, and the
	// peer's place in the burst's list of peers (w.burstPeers, and the
	// keypair and endpoint loaded for it in w.burstKP and w.burstEP).
	// batchN is 0 outside a burst (outbound's pass 1 lists the peer when
	// it makes it 1 or more, pass 2 sets it back); slot is valid while
	// the burst is handled. A burst holds at most 7 × MaxBurst frames
	// (Config.Burst and its fragments), inside an int16; New enforces it.
	batchN  int16
	granted int16
	slot    int16
	dirty   bool
	srcGen  uint8

	// (The first line, bytes 0-63, is all that outbound reads and
	// writes of a peer whose outer headers the shared source writes:
	// TestPeerLocalLayout.)

	// outer-header template for tmplEp (rebuilt when the endpoint changes)
	// when the shared source does not write them (srcGen 0)
	tmpl header.UDPTemplate

	// receive stamps not yet published
	lastReceived     int64
	lastDataReceived int64
	rxBytes          uint64

	// roaming
	lastSrc    netip.AddrPort
	lastDst    netip.Addr
	lastSrcMAC [6]byte
	sawCurrent bool
	// sessionAsked: HandshakeNeeded was raised for the packets held now
	// (hold, flushHeld); cleared when they leave (emptied).
	sessionAsked bool

	// held packets waiting for a keypair / neighbour
	held []dataplane.Frame

	// (256 bytes, whole cache lines: a field added here must round it up
	// to the next line with a pad, which a zero pad would not do, the
	// compiler growing a struct that ends with one.)
}

type worker struct {
	e     *Engine
	id    int
	lanQ  dataplane.Queue
	wanQ  dataplane.Queue
	lanRX dataplane.RX
	lanTX dataplane.TX
	wanRX dataplane.RX
	wanTX dataplane.TX

	waiter  *dataplane.Waiter
	mailbox chan mail

	burst    int
	frames   []dataplane.Frame
	injected [1]dataplane.Frame // a datagram from the host kernel (receiveWAN)
	// rxQueue is the queue the replay window is told the burst being
	// checked came from: the worker's id, or replay.AnyQueue for
	// datagrams reassembled from fragments (here or by the host's
	// kernel), which came on no queue of their session's.
	rxQueue int
	// reasmOut holds the datagrams an inbound burst's fragments completed
	// (reassemble.go; nil without Config.Reassemble).
	reasmOut []dataplane.Frame
	out      []dataplane.Frame
	peerOf   []*peerLocal
	pkt      header.Packet

	// outbound: the burst queued for chachapoly.Seal and what wraps it
	sealQ    []chachapoly.Packet
	sealMeta []sealMeta

	// inbound: the burst queued for chachapoly.Open
	openQ    []chachapoly.Packet
	openMeta []openMeta
	openOK   []bool

	// inbound batch state
	lanMTU   int // the LAN MTU the burst is checked against (Engine.lanMTU)
	meta     []rxMeta
	counters []uint64
	accepted []bool
	scratchC []uint64
	scratchA []bool
	// replayCheck's grouping of a burst by keypair (replaycheck.go): a table
	// of 2^(64-replayShift) entries, empty between bursts, the next frame
	// of each frame's keypair, and the table entries in use.
	replayTab   []replayGroup
	replayShift uint8
	sameNext    []int32
	replayHeads []int32

	// local is the per-peer state by Peer.ID, in chunks of localChunk so
	// that growing it never moves a peerLocal a batch points to; a chunk
	// is nil until the worker meets one of its peers (peerState).
	local     [][]peerLocal
	heldTotal int
	heldPeers []heldPeer // peers with held frames
	evictAt   int        // evictLargest's cursor in heldPeers

	nbr      [nbrCacheSize]nbrEntry
	nbrWaitN int // frames in nbrWait counted in nbr's slots (nbrHold)
	// dstRoutes and srcRoutes cache allowed-IPs lookups of destinations
	// (outbound) and sources (inbound) (routecache.go).
	dstRoutes, srcRoutes *routeCache
	nbrWait              []nbrWaiting
	ctlWait              []ctlWaiting // control-plane frames waiting for the WAN next hop
	nbrTried             time.Time

	lanMAC, wanMAC [6]byte
	// lanVLAN and wanVLAN are the ports' VLANs (0: untagged), lanL2 and
	// wanL2 the Ethernet header lengths of the frames sent there, wanTag
	// the VLAN of the outer-header templates (-1: untagged) (vlan.go).
	lanVLAN, wanVLAN uint16
	lanL2, wanL2     int
	wanTag           int
	portSpan         uint16    // number of our UDP ports from the listen port up
	wan              *wanState // loaded from Engine.wan once per turn of run
	// ipID is the identification of the last outer IPv4 packet sent
	// (wrap, sendControl): RFC 6864 wants it unique per source,
	// destination and protocol while a datagram may live, since a router
	// on the way may fragment it (DF is clear). The workers' sequences
	// are disjoint, as fwdState.fragID's: worker i's starts at a random
	// base + i and steps by ipStep, the number of workers (from one start
	// each, two queues sent one identification to a peer at once).
	ipID, ipStep uint16
	lastPublish  int64
	stampBase    int64 // what the peers' send stamps count from (sendstamps.go)
	// The outer headers' source that the peers with srcGen == srcGen
	// share (outersrc.go): srcGen 0 until the first is taken; srcWAN the
	// WAN state it was taken under.
	src        header.UDPv4Source
	srcGen     uint8
	srcWAN     *wanState
	dirtyPeers []int
	// ghost is the last throw-away state peerState made for a removed
	// peer whose ID a new peer has (reused for that peer's next frames;
	// dropped at publish, so that it holds the peer for a moment only).
	ghost *peerLocal
	// burstPeers lists the peers of the outbound burst being sealed, each
	// once (outbound.go), and burstKP and burstEP the keypair (nil: none
	// usable) and endpoint each sends with, by the same index
	// (peerLocal.slot); all three are cleared after each burst.
	burstPeers []*peerLocal
	burstKP    []*Keypair
	burstEP    []*Endpoint
	lastPeers  int // len(burstPeers) of the last outbound burst
	// ahead is routeAhead's reading of each frame's destination and the
	// peer it routes to (routeahead.go).
	ahead []routeAheadFrame
	// in is inbound's look-ahead scratch (inahead.go).
	in inAhead

	c counters

	// turn counts loop turns (by 2); quiet publishes it, odd while parked
	// (retire.go).
	turn  uint64
	quiet quiescence
	fwd   fwdState // forwarding as a router (router.go)

	// tid is the worker's OS thread ID while it owns one (for per-thread
	// accounting such as context switches); 0 while it is shared
	// (threads.go).
	tid atomic.Int32
	// stalled: a SendWait to this worker ran out of time with the
	// mailbox full, and the worker has not taken mail since; SendWait
	// does not wait for it again until it has (sendwait.go). (Beside
	// tid, in what would be padding: the fields after it keep their
	// places.)
	stalled atomic.Bool
	th      thread // OS-thread state, the worker's own (threads.go)

	// capture, if not nil, copies frames at the burst points (capture.go).
	capture atomic.Pointer[Capture]

	// hair holds an inbound burst's packets that go back into the tunnel
	// (hairpin.go); hairCache keeps lanRoute's answers, for the
	// snapshot hairRT of generation hairGen. (Last: off the lines the
	// paths toward the LAN use.)
	hair      []dataplane.Frame
	hairCache *[hairCacheSize]hairEntry
	hairRT    *routeTable
	hairGen   uint32
	// toHost gathers an inbound burst's packets for the host (their
	// frames' data), handed to Config.Exception in one call at the end of
	// deliver; hostOne carries a single one (icmpToHost). Neither keeps a
	// packet past the call (cleared after it).
	toHost  [][]byte
	hostOne [1][]byte
}

func newWorker(e *Engine, i int) (*worker, error) {
	w := &worker{
		e:       e,
		id:      i,
		rxQueue: i,
		lanQ:    e.cfg.LAN.Queue(i),
		wanQ:    e.cfg.WAN.Queue(i),
		mailbox: make(chan mail, MailboxLen),
		burst:   e.cfg.Burst,
	}
	w.lanRX, w.lanTX = w.lanQ.RX(), w.lanQ.TX()
	w.wanRX, w.wanTX = w.wanQ.RX(), w.wanQ.TX()
	// The worker owns both queues: when they are on one pool (AF_XDP ports
	// on a shared UMEM) they keep free frames in one cache, so that a
	// frame received on one side and sent on the other comes back to
	// this worker's CPU instead of through the pool's shared free list.
	if ls, ok := w.lanQ.(dataplane.CacheSharer); ok {
		if ws, ok := w.wanQ.(dataplane.CacheSharer); ok {
			ws.UseCache(ls.Cache())
		}
	}
	w.portSpan = max(e.cfg.SourcePorts, 1)
	w.wan = e.wan.Load()
	copy(w.lanMAC[:], e.cfg.LAN.MAC())
	copy(w.wanMAC[:], e.cfg.WAN.MAC())
	w.lanVLAN, w.wanVLAN = e.cfg.LANVLAN, e.cfg.WANVLAN
	w.lanL2, w.wanL2 = l2Len(w.lanVLAN), l2Len(w.wanVLAN)
	w.fwd.fragID, w.fwd.fragStep = e.fragIDBase+uint32(i), uint32(e.cfg.LAN.NumQueues())
	w.ipID, w.ipStep = uint16(e.fragIDBase>>16)+uint16(i), uint16(e.cfg.LAN.NumQueues())
	w.wanTag = -1
	if w.wanVLAN != 0 {
		w.wanTag = int(w.wanVLAN)
	}
	var err error
	if w.waiter, err = dataplane.NewWaiter(); err != nil {
		return nil, err
	}
	w.waiter.Add(w.lanRX)
	w.waiter.Add(w.wanRX)
	b := w.burst
	// Outbound bursts grow by the fragments of their oversized packets.
	fb := b + fragSlots(b)
	w.frames = make([]dataplane.Frame, fb)
	w.out = make([]dataplane.Frame, 0, fb+1)
	w.hair = make([]dataplane.Frame, 0, b)
	w.reasmOut = newReasmOut(e, b)
	w.hairCache = new([hairCacheSize]hairEntry)
	w.peerOf = make([]*peerLocal, fb)
	w.fwd.runs, w.fwd.scratch = make([]fragRun, 0, b), make([]dataplane.Frame, fb-b)
	w.burstPeers = make([]*peerLocal, 0, fb)
	w.burstKP, w.burstEP = make([]*Keypair, fb), make([]*Endpoint, fb)
	w.ahead = make([]routeAheadFrame, b)
	w.in = newInAhead(b, fb)
	w.sealQ = make([]chachapoly.Packet, 0, fb)
	w.sealMeta = make([]sealMeta, 0, fb)
	w.openQ = make([]chachapoly.Packet, 0, b)
	w.openMeta = make([]openMeta, 0, b)
	w.openOK = make([]bool, b)
	w.meta = make([]rxMeta, b)
	w.toHost = make([][]byte, 0, b)
	w.counters = make([]uint64, b)
	w.accepted = make([]bool, b)
	w.scratchC = make([]uint64, b)
	w.scratchA = make([]bool, b)
	tb := max(2*b, 16)
	tb = 1 << bits.Len(uint(tb-1)) // a power of 2
	w.replayTab, w.replayShift = make([]replayGroup, tb), uint8(64-bits.TrailingZeros(uint(tb)))
	w.sameNext, w.replayHeads = make([]int32, b), make([]int32, 0, b)
	w.dstRoutes, w.srcRoutes = new(routeCache), new(routeCache)
	w.park() // not running: holds no keypair
	return w, nil
}

func (w *worker) close() {
	// Free held frames (of lanRX's pool, or of lanTX's: sendInner's),
	// each back to its own pool whatever half frees it (dataplane.TX.Free;
	// TestCloseFreesHeldToTheirPools).
	for _, h := range w.heldPeers {
		pl := w.localAt(h.id)
		w.count(DropClosed, len(pl.held))
		w.lanTX.Free(pl.held)
		w.emptied(pl)
	}
	w.heldPeers = w.heldPeers[:0]
	w.heldTotal = 0
	for i := range w.nbrWait {
		w.count(DropClosed, 1)
		w.wanRX.Free(unsafeOne(&w.nbrWait[i].f))
	}
	w.nbrWait = nil
	for i := range w.ctlWait {
		w.count(DropClosed, 1)
		w.wanTX.Free(unsafeOne(&w.ctlWait[i].f))
	}
	w.ctlWait = nil
	// The mail no worker took (each post said true, so no sender
	// counts it): counted closed, as the frames held. A post that
	// passed Send's look at closing before Close and lands after this
	// drain is not counted (no lock on the senders' path).
	for len(w.mailbox) > 0 { // the one receiver now
		<-w.mailbox
		w.count(DropClosed, 1)
	}
	w.c.held.Store(0)
	w.waiter.Close()
}

// run is the worker loop: poll both RX halves and the mailbox, process,
// publish stamps, block when idle.
func (w *worker) run() {
	// Own an OS thread (pinned) or share the Go scheduler's, by the
	// process's worker count (threads.go); looked at again every publish
	// interval and after every sleep.
	runningWorkers.Add(1)
	shared := w.placeThread()
	defer func() {
		runningWorkers.Add(-1)
		// A thread whose affinity cannot be restored stays locked, and
		// the runtime ends it with the goroutine.
		w.share()
	}()
	// Busy-poll for a while after the last work before blocking in the
	// waiter (dataplane.Spinner: at most IdleSpin, down to
	// dataplane.MinSpin when the spins keep running out): at high rates a worker never sleeps, so it costs no
	// context switch per burst; idle, it costs no CPU. A shared worker
	// (threads.go) yields instead, for at most sharedSpin. The clock is read
	// once per turn: a turn after work or a wake-up takes its reading as
	// the end of that work. The spin is timed on the engine's clock when
	// that is the real one; an injected clock (tests) may stand still,
	// and the spin then reads the wall clock.
	sp := dataplane.NewSpinner(w.e.cfg.IdleSpin, dataplane.MinSpin)
	realClock := w.e.cfg.Now == nil
	wall := time.Now()
	lastWork := int64(0)
	fresh := true // the previous turn worked or woke: lastWork is this turn's clock
	for !w.e.closing.Load() {
		w.beginTurn()
		now := w.e.now()
		t := now
		if !realClock {
			t = int64(time.Since(wall))
		}
		if fresh {
			lastWork = t
		}
		w.wan = w.e.wan.Load()
		work := w.outbound(now)
		work += w.inbound(now)
		work += w.drainMailbox(now)
		if len(w.heldPeers) > 0 {
			w.flushHeld(now)
		}
		if len(w.nbrWait) > 0 || len(w.ctlWait) > 0 {
			w.flushNeighbourWait(now)
		}
		if now-w.lastPublish >= int64(PublishInterval) {
			w.publish(now)
			shared = w.placeThread()
		}
		if work > 0 {
			if !fresh {
				// Found while spinning, t - lastWork after the last
				// work.
				sp.Hit(t - lastWork)
			}
			// The spin counts from the end of the work (the next
			// turn's clock): a long burst must not use it up.
			fresh = true
			continue
		}
		fresh = false
		if shared {
			if t-lastWork < sharedSpin {
				runtime.Gosched()
				continue
			}
		} else if t-lastWork < sp.Budget() {
			continue
		} else {
			sp.Miss()
		}
		w.lanTX.Reclaim()
		w.wanTX.Reclaim()
		timeout := dataplane.Forever
		if len(w.dirtyPeers) > 0 || len(w.heldPeers) > 0 {
			timeout = PublishInterval
		}
		if len(w.nbrWait) > 0 || len(w.ctlWait) > 0 {
			timeout = neighbourRetry
		}
		w.park()
		_, _ = w.waiter.Wait(timeout)
		shared = w.placeThread()
		fresh = true
	}
	w.publish(w.e.now())
	w.park()
}

// localChunk is the number of peerLocals allocated at once (32 KiB). A
// chunk must not fit the allocator's largest size class (32 KiB) with
// its malloc header: a large object starts on a page, while a smaller one
// that holds pointers starts 8 bytes into its slot (Go 1.22's malloc
// header), which shifted every peerLocal of a 20 KiB chunk off its cache
// lines. 32 KiB and the 8-byte header do not fit (TestPeerLocalLayout
// checks the alignment).
const localChunk = 128

// localAt is the state of the peer with ID id (< len(w.local)*localChunk).
func (w *worker) localAt(id int) *peerLocal { return &w.local[id/localChunk][id%localChunk] }

// local state for p, growing the array when peers were added.
func (w *worker) peerState(p *Peer) *peerLocal {
	if pl := w.met(p); pl != nil {
		return pl
	}
	for p.ID >= len(w.local)*localChunk {
		// The peerLocals already handed out (a batch keeps pointers to
		// them) stay where they are.
		w.local = append(w.local, nil)
	}
	if c := &w.local[p.ID/localChunk]; *c == nil {
		// A chunk is made when the worker first meets one of its peers:
		// peers whose packets never reach this queue cost it nothing.
		*c = make([]peerLocal, localChunk)
	}
	pl := w.localAt(p.ID)
	if pl.peer != p {
		if p.Removed.Load() && pl.peer != nil && !pl.peer.Removed.Load() {
			// p was removed and a new peer has its ID already: what
			// still names p (a burst of the routes from before the
			// removal, a control packet mailed before it, a keypair
			// looked up before it) must not take the new peer's
			// state (its held packets, its unpublished counters).
			// It gets a state of its own, thrown away after use:
			// dirty, so that it is never published under the ID.
			// Rare: an allocation, not a lock, and one for a run of
			// such frames of one peer (w.ghost), not one a frame.
			if g := w.ghost; g != nil && g.peer == p {
				return g
			}
			w.ghost = &peerLocal{peer: p, dirty: true}
			return w.ghost
		}
		// A new peer took this ID: start clean (held frames of the old
		// one are dropped).
		if len(pl.held) > 0 {
			w.dropHeld(pl)
		}
		*pl = peerLocal{peer: p, held: pl.held[:0]}
	}
	return pl
}

// met is peerState's common path: the state of p when the worker met p
// before, or nil (peerState then makes it).
func (w *worker) met(p *Peer) *peerLocal { return w.metAt(p, uint(p.ID)) }

// metAt is met for a peer whose ID is id as far as the caller knows (its
// route cache entry's), small enough to be inlined (outbound takes it for
// every frame): nil unless p.ID is id. The peerLocal's address comes from
// id, not from p.ID, so its load does not wait for the Peer's line: with
// traffic for many peers both are cache misses, which then overlap (the
// check of p.ID is predicted, not waited for).
func (w *worker) metAt(p *Peer, id uint) *peerLocal {
	if c := id / localChunk; c < uint(len(w.local)) {
		if ch := w.local[c]; len(ch) == localChunk && ch[id%localChunk].peer == p && uint(p.ID) == id {
			return &ch[id%localChunk]
		}
	}
	return nil
}

func (w *worker) markDirty(pl *peerLocal) {
	if !pl.dirty {
		pl.dirty = true
		w.dirtyPeers = append(w.dirtyPeers, pl.peer.ID)
	}
}

// transmit sends frames and frees (counting) what the ring did not take;
// it returns how many it took, frames[:sent].
func (w *worker) transmit(tx dataplane.TX, frames []dataplane.Frame) (sent int) {
	if len(frames) == 0 {
		return 0
	}
	if c := w.capture.Load(); c != nil {
		port := CaptureLAN
		if tx == w.wanTX {
			port = CaptureWAN
		}
		c.put(w.id, port, CaptureTX, frames)
	}
	if sent = dataplane.TransmitRetry(tx, frames); sent < len(frames) {
		w.count(DropRingFull, len(frames)-sent)
		tx.Free(frames[sent:])
	}
	return sent
}

// freeRest counts the drops in bad and, when left > 0 frames were left in
// frames (not zeroed), frees them in one call.
func (w *worker) freeRest(rx dataplane.RX, frames []dataplane.Frame, bad *[NumDropReasons]int32, left int) {
	for r, c := range bad {
		if c > 0 {
			w.count(DropReason(r), int(c))
			left = max(left, 1) // every counted drop left its frame
		}
	}
	if left == 0 {
		return
	}
	k := 0
	for i := range frames {
		if !frames[i].IsZero() {
			frames[k] = frames[i]
			k++
		}
	}
	rx.Free(frames[:k])
}

// unsafeOne views one frame as a slice of one without allocating.
func unsafeOne(f *dataplane.Frame) []dataplane.Frame {
	return unsafe.Slice(f, 1)
}
