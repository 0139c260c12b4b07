package fastpath

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// WireGuard message layout (whitepaper §5.4). The noise package has the
// same constants; the fast path keeps its own to stay free of the control
// plane's imports.
const (
	msgTransport      = 4
	transportHdrLen   = 16 // type(1) reserved(3) receiver(4) counter(8)
	tagLen            = 16 // Poly1305
	minTransportLen   = transportHdrLen + tagLen
	rejectAfterTimeNs = int64(180 * time.Second) // whitepaper §6.1 Reject-After-Time
)

// outer header room: Ethernet + IPv6 (the larger) + UDP.
const maxOuterHdr = header.EthernetLen + header.IPv6Len + header.UDPLen

type mail struct {
	ctl    ControlPacket
	inner  []byte
	raw    []byte // a whole frame for the LAN (rawLAN) or WAN port
	rawLAN bool
	// wan is a WireGuard message from wanSrc to wanDst that came through
	// the host kernel (Engine.ReceiveWAN).
	wan            []byte
	wanSrc, wanDst netip.AddrPort
}

// peerLocal is a worker's private state for one peer, indexed by Peer.ID.
type peerLocal struct {
	peer *Peer

	// batch grouping (outbound)
	batchN    int
	nonce     uint64
	granted   int
	kp        *Keypair
	ep        *Endpoint
	lastGroup int // batch serial of the last grouping, to reset lazily

	// held packets waiting for a keypair / neighbour
	held []dataplane.Frame

	// stamps and counters not yet published
	dirty            bool
	lastSent         int64
	lastReceived     int64
	lastDataSent     int64
	lastDataReceived int64
	txBytes, rxBytes uint64

	// outer-header template for ep (rebuilt when the endpoint changes)
	tmpl   header.UDPTemplate
	tmplEp *Endpoint

	// roaming
	lastSrc    netip.AddrPort
	lastDst    netip.Addr
	lastSrcMAC [6]byte
	sawCurrent bool
}

// Frames waiting for a LAN neighbour to resolve: at most maxNeighbourWait
// per worker (so they can never drain the queue's buffers), retried every
// neighbourRetry, dropped (no_neighbour) after neighbourWaitMax.
const (
	maxNeighbourWait = 256
	neighbourRetry   = time.Millisecond
	neighbourWaitMax = 3 * time.Second
)

type nbrWaiting struct {
	f     dataplane.Frame // the inner IP packet, Ethernet not yet added
	dst   netip.Addr
	v6    bool
	since time.Time
}

type nbrEntry struct {
	addr    netip.Addr
	mac     [6]byte
	expires int64
}

const nbrCacheSize = 256 // power of 2

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
	out      []dataplane.Frame
	peerOf   []*peerLocal
	pkt      header.Packet
	nonce    [12]byte

	// inbound batch state
	meta     []rxMeta
	counters []uint64
	accepted []bool
	scratchC []uint64
	scratchA []bool
	done     []bool

	local     []peerLocal
	heldTotal int
	heldPeers []int // IDs of peers with held frames

	nbr [nbrCacheSize]nbrEntry
	// dstRoutes and srcRoutes cache allowed-IPs lookups of destinations
	// (outbound) and sources (inbound) (routecache.go).
	dstRoutes, srcRoutes *routeCache
	nbrWait              []nbrWaiting
	nbrTried             time.Time

	lanMAC, wanMAC [6]byte
	portSpan       uint16 // number of our UDP ports from ListenPort up
	ipID           uint16
	lastPublish    int64
	dirtyPeers     []int
	groupSerial    int

	c counters

	// tid is the worker's OS thread ID while it runs (for per-thread
	// accounting such as context switches).
	tid atomic.Int32

	// capture, if not nil, copies frames at the burst points (capture.go).
	capture atomic.Pointer[Capture]
}

func newWorker(e *Engine, i int) (*worker, error) {
	w := &worker{
		e:       e,
		id:      i,
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
	copy(w.lanMAC[:], e.cfg.LAN.MAC())
	copy(w.wanMAC[:], e.cfg.WAN.MAC())
	var err error
	if w.waiter, err = dataplane.NewWaiter(); err != nil {
		return nil, err
	}
	w.waiter.Add(w.lanRX)
	w.waiter.Add(w.wanRX)
	b := w.burst
	w.frames = make([]dataplane.Frame, b)
	w.out = make([]dataplane.Frame, 0, b+1)
	w.peerOf = make([]*peerLocal, b)
	w.meta = make([]rxMeta, b)
	w.counters = make([]uint64, b)
	w.accepted = make([]bool, b)
	w.scratchC = make([]uint64, b)
	w.scratchA = make([]bool, b)
	w.done = make([]bool, b)
	w.dstRoutes, w.srcRoutes = new(routeCache), new(routeCache)
	return w, nil
}

func (w *worker) close() {
	// Free held frames.
	for _, id := range w.heldPeers {
		pl := &w.local[id]
		w.count(DropClosed, len(pl.held))
		w.lanTX.Free(pl.held)
		pl.held = pl.held[:0]
	}
	w.heldPeers = w.heldPeers[:0]
	w.heldTotal = 0
	for i := range w.nbrWait {
		w.count(DropClosed, 1)
		w.wanRX.Free(unsafeOne(&w.nbrWait[i].f))
	}
	w.nbrWait = nil
	w.c.held.Store(0)
	w.waiter.Close()
}

// run is the worker loop: poll both RX halves and the mailbox, process,
// publish stamps, block when idle.
func (w *worker) run() {
	runtime.LockOSThread()
	w.tid.Store(int32(unix.Gettid()))
	if cpus := w.e.cfg.CPUs; len(cpus) > 0 {
		var set unix.CPUSet
		set.Set(cpus[w.id%len(cpus)])
		_ = unix.SchedSetaffinity(0, &set) // best effort; documented on Config.CPUs
		// The thread stays locked: when run returns, the runtime ends it
		// instead of handing its narrowed affinity to other goroutines.
	} else {
		defer runtime.UnlockOSThread()
	}
	// Busy-poll for IdleSpin after the last work before blocking in the
	// waiter: at high rates a worker never sleeps, so it costs no context
	// switch per burst; idle, it costs no CPU. The spin is timed on the
	// engine's clock when that is the real one, so that an idle turn
	// reads the clock once; an injected clock (tests) may stand still,
	// and the spin then reads the wall clock.
	spin := int64(w.e.cfg.IdleSpin)
	realClock := w.e.cfg.Now == nil
	spinNow := w.e.now
	if !realClock {
		start := time.Now()
		spinNow = func() int64 { return int64(time.Since(start)) }
	}
	lastWork := spinNow()
	for !w.e.closing.Load() {
		now := w.e.now()
		work := w.outbound(now)
		work += w.inbound(now)
		work += w.drainMailbox(now)
		if len(w.heldPeers) > 0 {
			w.flushHeld(now)
		}
		if len(w.nbrWait) > 0 {
			w.flushNeighbourWait(now)
		}
		if now-w.lastPublish >= int64(PublishInterval) {
			w.publish(now)
		}
		if work > 0 {
			// The spin counts from the end of the work: a long burst
			// must not use it up.
			lastWork = spinNow()
			continue
		}
		// Idle: this turn's clock reading is as good as a new one.
		t := now
		if !realClock {
			t = spinNow()
		}
		if t-lastWork < spin {
			continue
		}
		w.lanTX.Reclaim()
		w.wanTX.Reclaim()
		timeout := dataplane.Forever
		if len(w.dirtyPeers) > 0 || len(w.heldPeers) > 0 {
			timeout = PublishInterval
		}
		if len(w.nbrWait) > 0 {
			timeout = neighbourRetry
		}
		_, _ = w.waiter.Wait(timeout)
		lastWork = spinNow()
	}
	w.publish(w.e.now())
}

// local state for p, growing the array when peers were added.
func (w *worker) peerState(p *Peer) *peerLocal {
	if p.ID >= len(w.local) {
		n := make([]peerLocal, max(p.ID+1, 2*len(w.local)))
		copy(n, w.local)
		w.local = n
	}
	pl := &w.local[p.ID]
	if pl.peer != p {
		// A new peer took this ID: start clean (held frames of the old
		// one are dropped).
		if len(pl.held) > 0 {
			w.dropHeld(pl)
		}
		*pl = peerLocal{peer: p, held: pl.held[:0], lastGroup: -1}
	}
	return pl
}

func (w *worker) markDirty(pl *peerLocal) {
	if !pl.dirty {
		pl.dirty = true
		w.dirtyPeers = append(w.dirtyPeers, pl.peer.ID)
	}
}

// usable returns the keypair and endpoint to send with, or nil.
func usable(p *Peer, now int64) (*Keypair, *Endpoint) {
	kp := p.Current.Load()
	if kp == nil || !kp.Confirmed() || kp.Dead() || now-kp.Created >= rejectAfterTimeNs {
		return nil, nil
	}
	ep := p.Endpoint.Load()
	if ep == nil || ep.DstMAC == ([6]byte{}) {
		return nil, nil
	}
	return kp, ep
}

// outbound handles one burst from the LAN: classify, group by peer, seal,
// add outer headers, transmit on the WAN.
func (w *worker) outbound(now int64) int {
	n := w.lanRX.Receive(w.frames[:w.burst])
	if n == 0 {
		return 0
	}
	if c := w.capture.Load(); c != nil {
		c.put(w.id, CaptureLAN, CaptureRX, w.frames[:n])
	}
	rt := w.e.routes.Load()
	w.groupSerial++
	frames := w.frames[:n]
	// Frame disposition as in inbound: a frame handed on (WAN TX batch,
	// held) is zeroed; frames left over at the end (drops, counted in bad,
	// and ARP/NDP frames once answered) are freed in one call.
	var bad [NumDropReasons]int32
	left := 0
	var (
		lastDst  netip.Addr // the last destination looked up, and its peer
		lastPeer *Peer
	)
	// Pass 1: parse, route, count per peer. Frames that leave the batch
	// get a nil peerOf.
	for i := range frames {
		w.peerOf[i] = nil
		f := &frames[i]
		if h := w.e.cfg.LANNeighbours; h != nil && isNeighbourFrame(f.Data()) {
			w.neighbour(h, w.lanTX, f.Data())
			left++
			continue
		}
		// The IP header is what a gateway judges; what follows it (even
		// an upper-layer header it cannot read) is the hosts' business.
		r := header.Parse(f.Data(), &w.pkt)
		if !r.IPHeaderOK() {
			if r == header.ReasonNotIP {
				bad[DropNotIP]++
			} else {
				bad[DropMalformed]++
			}
			left++
			continue
		}
		if w.pkt.Dst != lastDst { // a burst is mostly a few flows
			lastDst = w.pkt.Dst
			lastPeer, _ = w.dstRoutes.lookup(rt, lastDst) // nil: no route
		}
		peer, ok := lastPeer, lastPeer != nil
		if !ok {
			bad[DropNoRoute]++
			left++
			continue
		}
		ipLen := w.pkt.L3End - w.pkt.L3Off
		f.TrimFront(w.pkt.L3Off)
		f.SetLen(ipLen)
		if ipLen > w.e.cfg.MTU {
			w.tooBig(f)
			bad[DropTooBig]++
			left++
			continue
		}
		pl := w.peerState(peer)
		if pl.lastGroup != w.groupSerial {
			pl.lastGroup = w.groupSerial
			pl.batchN = 0
		}
		pl.batchN++
		// The source-port hash needs the inner 5-tuple; stash it in the
		// frame order: computed again in pass 2 from the packet itself.
		w.peerOf[i] = pl
	}
	// Pass 2: per peer, one nonce reservation; seal in frame order.
	out := w.out[:0]
	var encBytes uint64
	var enc int
	for i := range frames {
		pl := w.peerOf[i]
		if pl == nil {
			continue
		}
		if pl.batchN > 0 {
			// First frame of this peer in the batch: reserve for all.
			kp, ep := usable(pl.peer, now)
			pl.kp, pl.ep, pl.granted = kp, ep, 0
			if kp != nil {
				pl.nonce, pl.granted = kp.ReserveNonces(pl.batchN)
			}
			pl.batchN = 0
		}
		f := &frames[i]
		if pl.kp == nil || pl.granted == 0 {
			if pl.kp != nil {
				// Out of nonces: the control plane must rekey.
				bad[DropNonceExhausted]++
				left++
				pl.peer.HandshakeNeeded.Store(true)
				continue
			}
			w.hold(pl, f) // takes the frame (keeps it, or drops and counts)
			*f = dataplane.Frame{}
			continue
		}
		inner := f.Len()
		if !w.seal(f, pl, pl.nonce) {
			bad[DropNoBuffer]++
			left++
			continue
		}
		pl.nonce++
		pl.granted--
		enc++
		encBytes += uint64(inner)
		pl.lastSent = now
		if inner > 0 {
			pl.lastDataSent = now
		}
		pl.txBytes += uint64(f.Len() - w.outerLen(pl.ep))
		w.markDirty(pl)
		out = append(out, *f)
		*f = dataplane.Frame{}
	}
	w.c.encrypted.Add(uint64(enc))
	w.c.encryptedBytes.Add(encBytes)
	w.freeRest(w.lanRX, frames, &bad, left)
	w.transmit(w.wanTX, out)
	return n
}

func (w *worker) outerLen(ep *Endpoint) int {
	if ep.Dst.Addr().Is4() {
		return header.EthernetLen + header.IPv4MinLen + header.UDPLen
	}
	return header.EthernetLen + header.IPv6Len + header.UDPLen
}

// transmit sends frames and frees (counting) what the ring did not take.
func (w *worker) transmit(tx dataplane.TX, frames []dataplane.Frame) {
	if len(frames) == 0 {
		return
	}
	if c := w.capture.Load(); c != nil {
		port := CaptureLAN
		if tx == w.wanTX {
			port = CaptureWAN
		}
		c.put(w.id, port, CaptureTX, frames)
	}
	sent := tx.Transmit(frames)
	if sent < len(frames) {
		// One retry after reclaiming completions.
		tx.Reclaim()
		sent += tx.Transmit(frames[sent:])
	}
	if sent < len(frames) {
		w.count(DropRingFull, len(frames)-sent)
		tx.Free(frames[sent:])
	}
}

// seal encrypts the IP packet in f (data = the inner packet) with counter c
// and wraps it in transport header, UDP, IP and Ethernet toward pl.ep.
func (w *worker) seal(f *dataplane.Frame, pl *peerLocal, c uint64) bool {
	plen := f.Len()
	// Padding (whitepaper §5.4.6): to a multiple of 16, never past the MTU.
	padded := (plen + 15) &^ 15
	if padded > w.e.cfg.MTU {
		padded = max(plen, w.e.cfg.MTU)
	}
	// Inner 5-tuple hash for the source port, read before sealing.
	var srcPort uint16
	if pl.peer.SrcPorts > 1 {
		srcPort = pl.peer.SrcPortBase + uint16(flowHash(f.Data())%uint32(pl.peer.SrcPorts))
	} else {
		srcPort = pl.peer.SrcPortBase
	}
	if f.Tailroom() < padded-plen+tagLen {
		return false
	}
	f.SetLen(padded)
	d := f.Data()
	clear(d[plen:padded])
	pl.kp.Seal(d[:0], d, c, &w.nonce)
	f.SetLen(padded + tagLen)
	// Outer headers from the peer's template (rebuilt when the endpoint
	// changed): one copy and a few length and checksum patches.
	ep := pl.ep
	if pl.tmplEp != ep {
		t, ok := header.NewUDPTemplate(header.UDPTemplateConfig{
			Dst: header.MAC(ep.DstMAC), Src: header.MAC(ep.SrcMAC), VLANID: -1,
			SrcAddr: ep.Src, DstAddr: ep.Dst.Addr(), DstPort: ep.Dst.Port(),
			UDPChecksumIPv4: w.e.cfg.IPv4UDPChecksum,
		})
		if !ok {
			return false
		}
		pl.tmpl, pl.tmplEp = t, ep
	}
	outer := pl.tmpl.Len()
	b := f.Prepend(outer + transportHdrLen)
	if b == nil {
		return false
	}
	t := b[outer:]
	t[0], t[1], t[2], t[3] = msgTransport, 0, 0, 0
	binary.LittleEndian.PutUint32(t[4:8], pl.kp.RemoteIndex)
	binary.LittleEndian.PutUint64(t[8:16], c)
	pl.tmpl.Put(b, srcPort, transportHdrLen+padded+tagLen)
	if l3 := pl.tmpl.IPOffset(); b[l3]>>4 == 4 {
		// A fresh IPv4 identification per packet (RFC 6864: the outer
		// datagram may be fragmented on the way, DF being clear).
		w.ipID++
		binary.BigEndian.PutUint16(b[l3+4:l3+6], w.ipID)
		ck := binary.BigEndian.Uint16(b[l3+10 : l3+12])
		binary.BigEndian.PutUint16(b[l3+10:l3+12], header.UpdateChecksum(ck, 0, w.ipID))
	}
	return true
}

// putOuter writes Ethernet, IP and UDP headers for a UDP payload of n
// bytes into b (which must hold the outer headers, payload following).
func (w *worker) putOuter(b []byte, ep *Endpoint, srcPort uint16, n int) {
	dst := ep.Dst.Addr()
	if dst.Is4() {
		header.PutEthernet(b, header.MAC(ep.DstMAC), header.MAC(ep.SrcMAC), header.EtherTypeIPv4)
		w.ipID++
		f := header.IPv4Fields{Protocol: header.ProtoUDP, ID: w.ipID, Src: ep.Src.As4(), Dst: dst.As4()}
		header.PutIPv4(b[header.EthernetLen:], &f, header.UDPLen+n)
		header.PutUDP(b[header.EthernetLen+header.IPv4MinLen:], srcPort, ep.Dst.Port(), n)
		return
	}
	header.PutEthernet(b, header.MAC(ep.DstMAC), header.MAC(ep.SrcMAC), header.EtherTypeIPv6)
	f := header.IPv6Fields{NextHeader: header.ProtoUDP, Src: ep.Src.As16(), Dst: dst.As16()}
	header.PutIPv6(b[header.EthernetLen:], &f, header.UDPLen+n)
	header.PutUDP(b[header.EthernetLen+header.IPv6Len:], srcPort, ep.Dst.Port(), n)
}

func (w *worker) udpChecksum(b []byte, ep *Endpoint) {
	off := header.EthernetLen + header.IPv4MinLen
	if ep.Dst.Addr().Is6() {
		off = header.EthernetLen + header.IPv6Len
	}
	u := header.UDP(b[off:])
	pseudo := header.PseudoHeaderChecksum(header.ProtoUDP, ep.Src, ep.Dst.Addr(), u.Length())
	u.SetChecksum(pseudo)
}

// flowHash hashes the inner IP packet's 5-tuple (addresses, protocol and,
// for TCP/UDP of unfragmented packets, ports) so that one inner flow always
// takes one outer source port.
func flowHash(p []byte) uint32 {
	var h uint64 = 0x9e3779b97f4a7c15
	var proto uint8
	var l4 []byte
	switch {
	case len(p) >= header.IPv4MinLen && p[0]>>4 == 4:
		h ^= uint64(binary.BigEndian.Uint32(p[12:16]))<<32 | uint64(binary.BigEndian.Uint32(p[16:20]))
		proto = p[9]
		ihl := int(p[0]&0x0f) * 4
		if binary.BigEndian.Uint16(p[6:8])&0x3fff == 0 && len(p) >= ihl+4 {
			l4 = p[ihl:]
		}
	case len(p) >= header.IPv6Len:
		h ^= binary.BigEndian.Uint64(p[8:16]) ^ binary.BigEndian.Uint64(p[16:24])*0xff51afd7ed558ccd
		h ^= binary.BigEndian.Uint64(p[24:32])*0xc4ceb9fe1a85ec53 ^ binary.BigEndian.Uint64(p[32:40])
		proto = p[6]
		if len(p) >= header.IPv6Len+4 {
			l4 = p[header.IPv6Len:]
		}
	}
	if proto == header.ProtoTCP || proto == header.ProtoUDP {
		if l4 != nil {
			h ^= uint64(binary.BigEndian.Uint32(l4[0:4])) << 7
		}
	}
	h ^= uint64(proto) << 56
	// splitmix64 finaliser
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return uint32(h)
}

// tooBig answers an inner packet larger than the tunnel MTU with ICMP
// "fragmentation needed" / "packet too big" to its sender (when RFC 1812
// §4.3.2.7 / RFC 4443 §2.4 allow). f holds the IP packet; the caller drops
// and counts it.
func (w *worker) tooBig(f *dataplane.Frame) {
	p := f.Data()
	var srcMAC header.MAC
	// The Ethernet source of the offending frame is still in the headroom.
	if f.Headroom() >= header.EthernetLen {
		var full dataplane.Frame = *f
		full.Prepend(header.EthernetLen)
		srcMAC = header.MAC(full.Data()[6:12])
	}
	var reply [1]dataplane.Frame
	if w.lanTX.Alloc(reply[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	r := &reply[0]
	r.SetLen(header.EthernetLen + header.ICMPv6ErrorMaxLen)
	b := r.Data()
	var n int
	var reason header.Reason
	if p[0]>>4 == 4 {
		if !w.e.cfg.LANAddr4.IsValid() || header.IPv4(p).DontFragment() == false {
			// Without DF the sender allows fragmentation; we do not
			// fragment, so the packet is only dropped.
			w.lanTX.Free(reply[:])
			return
		}
		header.PutEthernet(b, srcMAC, header.MAC(w.lanMAC), header.EtherTypeIPv4)
		n, reason = header.PutICMPv4FragNeeded(b[header.EthernetLen:], w.e.cfg.LANAddr4.As4(), p, uint16(w.e.cfg.MTU))
	} else {
		if !w.e.cfg.LANAddr6.IsValid() {
			w.lanTX.Free(reply[:])
			return
		}
		header.PutEthernet(b, srcMAC, header.MAC(w.lanMAC), header.EtherTypeIPv6)
		n, reason = header.PutICMPv6PacketTooBig(b[header.EthernetLen:], w.e.cfg.LANAddr6.As16(), p, uint32(w.e.cfg.MTU))
	}
	if reason != header.OK {
		w.lanTX.Free(reply[:])
		return
	}
	r.SetLen(header.EthernetLen + n)
	w.c.icmp.Add(1)
	w.transmit(w.lanTX, reply[:])
}

// hold keeps f (an inner IP packet) until pl's peer has a usable keypair
// and endpoint, and asks the control plane for a handshake.
func (w *worker) hold(pl *peerLocal, f *dataplane.Frame) {
	p := pl.peer
	p.FlushHeld.Store(false)
	p.HandshakeNeeded.Store(true)
	if ep := p.Endpoint.Load(); ep != nil && ep.DstMAC == ([6]byte{}) {
		p.NeedNeighbour.Store(true)
	}
	if len(pl.held) >= MaxHeldPerPeer || w.heldTotal >= w.e.cfg.MaxHeldPerQueue {
		// Drop the oldest, as wireguard-go does with its staged queue.
		if len(pl.held) == 0 {
			w.count(DropHeldOverflow, 1)
			w.lanRX.Free(unsafeOne(f))
			return
		}
		w.count(DropHeldOverflow, 1)
		w.lanRX.Free(pl.held[:1])
		copy(pl.held, pl.held[1:])
		pl.held = pl.held[:len(pl.held)-1]
		w.heldTotal--
	}
	if len(pl.held) == 0 {
		w.heldPeers = append(w.heldPeers, p.ID)
	}
	pl.held = append(pl.held, *f)
	w.heldTotal++
	w.setHeld()
}

func (w *worker) dropHeld(pl *peerLocal) {
	w.count(DropHeldOverflow, len(pl.held))
	w.lanRX.Free(pl.held)
	w.heldTotal -= len(pl.held)
	pl.held = pl.held[:0]
	w.setHeld()
}

// flushHeld sends the held packets of peers that now have a keypair.
func (w *worker) flushHeld(now int64) {
	keep := w.heldPeers[:0]
	for _, id := range w.heldPeers {
		pl := &w.local[id]
		if len(pl.held) == 0 {
			continue
		}
		kp, ep := usable(pl.peer, now)
		if kp == nil {
			if pl.peer.FlushHeld.Load() {
				w.count(DropHandshakeGaveUp, len(pl.held))
				w.lanRX.Free(pl.held)
				w.heldTotal -= len(pl.held)
				pl.held = pl.held[:0]
				continue
			}
			keep = append(keep, id)
			continue
		}
		held := pl.held
		pl.kp, pl.ep = kp, ep
		first, granted := kp.ReserveNonces(len(held))
		out := w.out[:0]
		for i := range held {
			f := &held[i]
			if i >= granted {
				w.count(DropNonceExhausted, 1)
				w.lanRX.Free(held[i : i+1])
				continue
			}
			inner := f.Len()
			if !w.seal(f, pl, first+uint64(i)) {
				w.count(DropNoBuffer, 1)
				w.lanRX.Free(held[i : i+1])
				continue
			}
			pl.lastSent = now
			if inner > 0 {
				pl.lastDataSent = now
			}
			pl.txBytes += uint64(f.Len() - w.outerLen(ep))
			w.c.encrypted.Add(1)
			w.c.encryptedBytes.Add(uint64(inner))
			out = append(out, *f)
			if len(out) == cap(out) {
				w.transmit(w.wanTX, out)
				out = out[:0]
			}
		}
		w.transmit(w.wanTX, out)
		w.markDirty(pl)
		w.heldTotal -= len(held)
		pl.held = held[:0]
	}
	w.heldPeers = keep
	w.setHeld()
}

// inbound handles one burst from the WAN: hand handshakes to the control
// plane, open transport data in place, check replay once per keypair per
// batch, check allowed IPs, and transmit the inner packets on the LAN.
//
// Frame disposition: a frame handed on (to the LAN TX batch, or held for a
// neighbour) is zeroed in w.frames; every frame still non-zero at the end —
// a counted drop, or one consumed here (handshake message copied to the
// control plane, keepalive, exception packet, ARP/NDP) — is freed in one
// call.
func (w *worker) inbound(now int64) int {
	n := w.wanRX.Receive(w.frames[:w.burst])
	if n == 0 {
		return 0
	}
	w.inboundBurst(w.frames[:n], now)
	return n
}

// receiveWAN wraps a WireGuard message that came through the host kernel
// (Engine.ReceiveWAN) in the Ethernet, IP and UDP headers it arrived with,
// in a frame of the WAN port's pool, and handles it as a received burst of
// one. The Ethernet source is unknown (zero): should the peer roam to this
// source, the control plane resolves the next hop's MAC.
func (w *worker) receiveWAN(m *mail, now int64) {
	w.c.fromKernel.Add(1)
	src, dst := m.wanSrc, m.wanDst
	ipLen, et := header.IPv4MinLen, uint16(header.EtherTypeIPv4)
	if !src.Addr().Is4() {
		ipLen, et = header.IPv6Len, header.EtherTypeIPv6
	}
	frames := w.injected[:]
	if w.wanTX.Alloc(frames) != 1 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &frames[0]
	n := header.EthernetLen + ipLen + header.UDPLen + len(m.wan)
	if !f.SetLen(n) {
		w.count(DropWANTooBig, 1)
		w.wanTX.Free(frames)
		return
	}
	b := f.Data()
	header.PutEthernet(b, header.MAC(w.wanMAC), header.MAC{}, et)
	l4 := b[header.EthernetLen+ipLen:]
	if src.Addr().Is4() {
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, Src: src.Addr().As4(), Dst: dst.Addr().As4()}
		header.PutIPv4(b[header.EthernetLen:], &ip, header.UDPLen+len(m.wan))
	} else {
		ip := header.IPv6Fields{NextHeader: header.ProtoUDP, HopLimit: 64, Src: src.Addr().As16(), Dst: dst.Addr().As16()}
		header.PutIPv6(b[header.EthernetLen:], &ip, header.UDPLen+len(m.wan))
	}
	header.PutUDP(l4, src.Port(), dst.Port(), len(m.wan))
	copy(l4[header.UDPLen:], m.wan)
	if !src.Addr().Is4() {
		// UDP over IPv6 needs its checksum (RFC 8200 §8.1).
		u := header.UDP(l4[:header.UDPLen+len(m.wan)])
		u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src.Addr(), dst.Addr(), u.Length()))
	}
	w.inboundBurst(frames, now)
}

// inboundBurst handles frames received on the WAN (see inbound).
func (w *worker) inboundBurst(frames []dataplane.Frame, now int64) {
	if c := w.capture.Load(); c != nil {
		c.put(w.id, CaptureWAN, CaptureRX, frames)
	}
	var bad [NumDropReasons]int32
	// Frames consumed here (handshakes, keepalives, exception), freed with
	// the drops.
	left := w.authenticate(frames, &bad, now)
	w.replayCheck(len(frames))
	out, consumed := w.deliver(frames, &bad, now)
	w.freeRest(w.wanRX, frames, &bad, left+consumed)
	w.transmit(w.lanTX, out)
}

// rxMeta is what inbound's first pass learnt of an authenticated transport
// packet, for its third.
type rxMeta struct {
	kp       *Keypair       // nil: not authenticated (dropped or consumed)
	src      netip.AddrPort // outer source
	plainLen int32          // plaintext length, with the sender's padding
	back     int32          // from the frame's data start back to the outer Ethernet header
	verdict  innerVerdict
}

// innerVerdict is what the first pass found in an authenticated packet's
// plaintext, acted on after the replay check.
type innerVerdict uint8

const (
	innerDeliver     innerVerdict = iota // ready for the LAN: trimmed to its IP length, Ethernet in front
	innerKeepalive                       // empty: a keepalive (whitepaper §6.5)
	innerMalformed                       // not a well-formed IP packet
	innerForeign                         // source outside the peer's allowed IPs (whitepaper §2)
	innerOwn                             // for the gateway's own tunnel address (trimmed, no Ethernet)
	innerNoNeighbour                     // next hop not resolved yet (trimmed, no Ethernet)
)

// authenticate is inbound's first pass: parse, look up the receiver index,
// open in place, and prepare the inner packet for the LAN right after it is
// opened (its IP header, allowed IPs, Ethernet toward the next hop; a
// neighbour it misses is asked for even if the packet turns out to be a
// replay). What it finds is acted on by deliver, after the replay check. It
// fills w.meta and w.counters for each frame and returns the number of
// frames it consumed (handshake messages, ARP/NDP).
func (w *worker) authenticate(frames []dataplane.Frame, bad *[NumDropReasons]int32, now int64) (left int) {
	meta := w.meta[:len(frames)]
	counters := w.counters[:len(frames)]
	rt := w.e.routes.Load()
	var (
		idxRun   uint32
		idxRunKp *Keypair // the live keypair of idxRun
		// The last inner source and the peer its allowed IPs name, and
		// the last destination resolved with its MAC address: a burst is
		// mostly a few flows.
		lastSrc     netip.Addr
		lastSrcPeer *Peer
		lastDst     netip.Addr
		lastMAC     [6]byte
	)
	for i := range frames {
		m := &meta[i]
		m.kp = nil
		f := &frames[i]
		d := f.Data()
		if r := header.Parse(d, &w.pkt); r != header.OK || w.pkt.Proto != header.ProtoUDP {
			// ARP and NDP are not UDP: looked for only here.
			if h := w.e.cfg.WANNeighbours; h != nil && isNeighbourFrame(d) {
				w.neighbour(h, w.wanTX, d)
				left++
				continue
			}
			bad[DropWANMalformed]++
			continue
		}
		// Our ports are the listen port and the source-port range above
		// it: a peer answers to the port we sent from.
		if w.pkt.DstPort-w.e.cfg.ListenPort >= w.portSpan || (w.pkt.Dst != w.e.cfg.WANAddr4 && w.pkt.Dst != w.e.cfg.WANAddr6) {
			bad[DropNotForUs]++
			continue
		}
		msg := d[w.pkt.PayloadOff : w.pkt.PayloadOff+w.pkt.PayloadLen]
		if len(msg) < 4 || msg[1]|msg[2]|msg[3] != 0 {
			bad[DropBadType]++
			continue
		}
		if msg[0] != msgTransport {
			if msg[0] >= 1 && msg[0] <= 3 {
				w.handshake(f, msg, now) // copies msg; the frame is freed with the rest
				left++
			} else {
				bad[DropBadType]++
			}
			continue
		}
		if len(msg) < minTransportLen {
			bad[DropShortData]++
			continue
		}
		// A burst is mostly one session: look its index up once.
		idx, kp := binary.LittleEndian.Uint32(msg[4:8]), idxRunKp
		if idx != idxRun || kp == nil {
			if kp = w.e.indexes.Lookup(idx); kp == nil {
				bad[DropUnknownIndex]++
				continue
			}
			if kp.Dead() || now-kp.Created >= rejectAfterTimeNs {
				bad[DropExpired]++
				continue
			}
			idxRun, idxRunKp = idx, kp
		}
		c := binary.LittleEndian.Uint64(msg[8:16])
		if c >= RejectAfterMessages {
			bad[DropCounterLimit]++
			continue
		}
		p, ok := kp.Open(msg[transportHdrLen:], c, &w.nonce)
		if !ok {
			bad[DropAuth]++
			continue
		}
		counters[i] = c
		m.kp = kp
		m.src = netip.AddrPortFrom(w.pkt.Src, w.pkt.SrcPort)
		m.plainLen = int32(len(p))
		m.back = 0
		if len(p) == 0 {
			m.verdict = innerKeepalive
			continue
		}
		off := w.pkt.PayloadOff + transportHdrLen
		f.TrimFront(off)
		f.SetLen(len(p))
		m.back = int32(off)
		// The IP header only: a gateway forwards what its upper layer
		// holds, as a router does.
		if header.ParseL3(f.Data(), &w.pkt) != header.OK {
			m.verdict = innerMalformed
			continue
		}
		if w.pkt.Src != lastSrc {
			lastSrc = w.pkt.Src
			lastSrcPeer, _ = w.srcRoutes.lookup(rt, lastSrc) // nil: no peer
		}
		if lastSrcPeer != kp.Peer {
			m.verdict = innerForeign
			continue
		}
		f.SetLen(w.pkt.L3End) // without the padding
		dst := w.pkt.Dst
		if len(rt.own) > 0 && w.e.cfg.Exception != nil && isOwn(rt, dst) {
			m.verdict = innerOwn
			continue
		}
		mac, ok := lastMAC, dst == lastDst
		if !ok {
			if mac, ok = w.lanNeighbour(dst, now); !ok {
				m.verdict = innerNoNeighbour
				continue
			}
			lastDst, lastMAC = dst, mac
		}
		et := uint16(header.EtherTypeIPv4)
		if dst.Is6() {
			et = header.EtherTypeIPv6
		}
		header.PutEthernet(f.Prepend(header.EthernetLen), header.MAC(mac), header.MAC(w.lanMAC), et)
		m.back -= header.EthernetLen
		m.verdict = innerDeliver
	}
	return left
}

// deliver is inbound's third pass, over the authenticated packets: the
// replay verdict, peer bookkeeping (once per run of one keypair), roaming,
// and the first pass's verdict on the inner packet. It returns the frames to
// transmit and the number of frames it consumed (keepalives, exception
// packets).
func (w *worker) deliver(frames []dataplane.Frame, bad *[NumDropReasons]int32, now int64) (out []dataplane.Frame, left int) {
	meta := w.meta[:len(frames)]
	accepted := w.accepted[:len(frames)]
	out = w.out[:0]
	var (
		dec      int
		decBytes uint64
		runKp    *Keypair // per-peer bookkeeping runs once per run of one keypair,
		pl       *peerLocal
		runSrc   netip.AddrPort // and the endpoint check once per run of one source
	)
	for i := range frames {
		m := &meta[i]
		kp := m.kp
		if kp == nil {
			continue
		}
		if !accepted[i] {
			bad[DropReplay]++
			continue
		}
		f := &frames[i]
		if kp != runKp {
			runKp, runSrc = kp, netip.AddrPort{}
			pl = w.received(kp, now)
		}
		dec++
		pl.rxBytes += uint64(m.plainLen) + minTransportLen
		if m.src != runSrc {
			runSrc = m.src
			w.sawSource(pl, f, m)
		}
		switch m.verdict {
		case innerDeliver:
			pl.lastDataReceived = now
			decBytes += uint64(f.Len() - header.EthernetLen)
			out = append(out, *f)
			*f = dataplane.Frame{}
		case innerKeepalive:
			w.c.keepalives.Add(1)
			left++ // consumed: freed with the rest
		case innerMalformed:
			bad[DropInnerMalformed]++
		case innerForeign:
			bad[DropAllowedIPs]++
		case innerOwn:
			pl.lastDataReceived = now
			decBytes += uint64(f.Len())
			w.e.cfg.Exception(f.Data())
			w.c.exception.Add(1)
			left++ // consumed: freed with the rest
		case innerNoNeighbour:
			pl.lastDataReceived = now
			decBytes += uint64(f.Len())
			w.waitNeighbour(f, bad)
		}
	}
	w.c.decrypted.Add(uint64(dec))
	w.c.decryptedBytes.Add(decBytes)
	return out, left
}

// received does the per-peer bookkeeping of a run of authenticated,
// accepted packets of kp: it promotes the keypair if it was the next one
// (the responder sends on a session only once data arrived on it,
// whitepaper §5.4.6), stamps the receive time and returns the
// worker's state of the peer.
func (w *worker) received(kp *Keypair, now int64) *peerLocal {
	pl := w.peerState(kp.Peer)
	if !kp.Confirmed() && kp.Peer.promote(kp) {
		w.e.Kick() // held packets may go now
	}
	pl.lastReceived = now
	w.markDirty(pl)
	return pl
}

// sawSource notes the outer source of a run of accepted packets from the
// peer of pl (frame f, described by m, its outer headers m.back bytes in
// front of its data): if it is not the peer's endpoint it is a candidate
// for roaming (whitepaper §2.1: the endpoint becomes the source of the
// latest authenticated packet), which publish acts on.
func (w *worker) sawSource(pl *peerLocal, f *dataplane.Frame, m *rxMeta) {
	if ep := pl.peer.Endpoint.Load(); ep != nil && ep.Dst == m.src {
		pl.sawCurrent = true
		return
	}
	if pl.sawCurrent && pl.lastSrc.IsValid() {
		return
	}
	outer := *f
	d := outer.Prepend(int(m.back))
	// The authentication pass checked that the outer destination is our
	// address of the source's family.
	dst := w.e.cfg.WANAddr6
	if m.src.Addr().Is4() {
		dst = w.e.cfg.WANAddr4
	}
	pl.lastSrc, pl.lastDst, pl.lastSrcMAC = m.src, dst, [6]byte(d[6:12])
}

// waitNeighbour holds f (an inner IP packet, checked by the first pass,
// Ethernet not yet added) while the resolver asks for its destination's MAC
// address, or counts its drop when too many wait already. f is zeroed when
// held.
func (w *worker) waitNeighbour(f *dataplane.Frame, bad *[NumDropReasons]int32) {
	if len(w.nbrWait) >= maxNeighbourWait {
		bad[DropNoNeighbour]++
		return
	}
	header.ParseL3(f.Data(), &w.pkt) // for the destination: rare
	dst := w.pkt.Dst
	w.nbrWait = append(w.nbrWait, nbrWaiting{f: *f, dst: dst, v6: dst.Is6(), since: time.Now()})
	*f = dataplane.Frame{}
	w.setHeld()
}

// flushNeighbourWait sends the frames whose neighbour resolved and drops
// those that waited too long; it asks again at most every neighbourRetry.
func (w *worker) flushNeighbourWait(now int64) {
	t := time.Now()
	if t.Sub(w.nbrTried) < neighbourRetry {
		return
	}
	w.nbrTried = t
	out := w.out[:0]
	keep := w.nbrWait[:0]
	for _, nw := range w.nbrWait {
		mac, ok := w.lanNeighbour(nw.dst, now)
		switch {
		case ok:
			f := nw.f
			et := uint16(header.EtherTypeIPv4)
			if nw.v6 {
				et = header.EtherTypeIPv6
			}
			header.PutEthernet(f.Prepend(header.EthernetLen), header.MAC(mac), header.MAC(w.lanMAC), et)
			out = append(out, f)
		case t.Sub(nw.since) > neighbourWaitMax:
			w.count(DropNoNeighbour, 1)
			w.wanRX.Free(unsafeOne(&nw.f))
		default:
			keep = append(keep, nw)
		}
		if len(out) == cap(out) {
			w.transmit(w.lanTX, out)
			out = out[:0]
		}
	}
	w.nbrWait = keep
	w.setHeld()
	w.transmit(w.lanTX, out)
}

// setHeld publishes the number of frames held (for a handshake or a
// neighbour).
func (w *worker) setHeld() {
	w.c.held.Store(uint64(w.heldTotal + len(w.nbrWait)))
}

func isOwn(rt *routeTable, a netip.Addr) bool {
	_, ok := rt.own[a]
	return ok
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

// replayCheck runs the replay window over the authenticated counters of
// w.meta[:n], once per distinct keypair in the batch (the common case is one
// keypair per batch: one lock), and fills w.accepted.
func (w *worker) replayCheck(n int) {
	meta := w.meta[:n]
	// The usual burst: every packet authenticated, all of one session.
	if kp := meta[0].kp; kp != nil {
		same := true
		for i := range meta[1:] {
			same = same && meta[1+i].kp == kp
		}
		if same {
			kp.CheckReplay(w.counters[:n], w.accepted[:n])
			return
		}
	}
	done := w.done[:n]
	for i := range meta {
		w.accepted[i] = false
		done[i] = meta[i].kp == nil
	}
	for i := range meta {
		if done[i] {
			continue
		}
		kp := meta[i].kp
		m := 0
		for j := i; j < n; j++ {
			if !done[j] && meta[j].kp == kp {
				w.scratchC[m] = w.counters[j]
				m++
			}
		}
		kp.CheckReplay(w.scratchC[:m], w.scratchA[:m])
		m = 0
		for j := i; j < n; j++ {
			if !done[j] && meta[j].kp == kp {
				w.accepted[j] = w.scratchA[m]
				done[j] = true
				m++
			}
		}
	}
}

// handshake copies a handshake message (types 1–3) to the control plane.
func (w *worker) handshake(f *dataplane.Frame, msg []byte, now int64) {
	d := f.Data()
	m := HandshakeMessage{
		Queue:    w.id,
		Src:      netip.AddrPortFrom(w.pkt.Src, w.pkt.SrcPort),
		Dst:      netip.AddrPortFrom(w.pkt.Dst, w.pkt.DstPort),
		SrcMAC:   [6]byte(d[6:12]),
		Data:     append([]byte(nil), msg...),
		Received: now,
	}
	select {
	case w.e.handshakes <- m:
		w.c.handshakes.Add(1)
	default:
		w.count(DropHandshakeQueueFull, 1)
	}
}

// lanNeighbour returns the MAC of the LAN next hop toward dst, from the
// worker's cache or, on a miss, the LAN resolver.
func (w *worker) lanNeighbour(dst netip.Addr, now int64) ([6]byte, bool) {
	h := nbrHash(dst)
	e := &w.nbr[h&(nbrCacheSize-1)]
	if e.addr == dst && now < e.expires {
		return e.mac, true
	}
	mac, ok := w.e.cfg.LANResolver.Resolve(dst)
	if !ok {
		return mac, false
	}
	*e = nbrEntry{addr: dst, mac: mac, expires: now + int64(NeighbourCacheTTL)}
	return mac, true
}

func nbrHash(a netip.Addr) uint32 {
	if a.Is4() {
		b := a.As4()
		return binary.BigEndian.Uint32(b[:]) * 0x9e3779b1 >> 8
	}
	b := a.As16()
	x := binary.BigEndian.Uint64(b[8:]) ^ binary.BigEndian.Uint64(b[:8])
	return uint32((x * 0x9e3779b97f4a7c15) >> 40)
}

// drainMailbox sends what the control plane posted.
func (w *worker) drainMailbox(now int64) int {
	done := 0
	for done < w.burst {
		var m mail
		select {
		case m = <-w.mailbox:
		default:
			return done
		}
		done++
		if m.wan != nil {
			w.receiveWAN(&m, now)
			continue
		}
		if m.inner != nil {
			w.sendInner(m.inner, now)
			continue
		}
		if m.raw != nil {
			tx := w.wanTX
			if m.rawLAN {
				tx = w.lanTX
			}
			w.sendRaw(tx, m.raw)
			continue
		}
		w.sendControl(&m.ctl, now)
	}
	return done
}

// sendControl builds a frame for a control-plane packet and transmits it.
func (w *worker) sendControl(c *ControlPacket, now int64) {
	ep := Endpoint{Dst: c.Dst, DstMAC: c.DstMAC, SrcMAC: w.wanMAC}
	if c.Dst.Addr().Is4() {
		ep.Src = w.e.cfg.WANAddr4
	} else {
		ep.Src = w.e.cfg.WANAddr6
	}
	if !ep.Src.IsValid() {
		w.count(DropNoRoute, 1)
		return
	}
	if ep.DstMAC == ([6]byte{}) {
		mac, ok := w.e.cfg.WANResolver.Resolve(c.Dst.Addr())
		if !ok {
			w.count(DropNoNeighbour, 1)
			return
		}
		ep.DstMAC = mac
	}
	var fr [1]dataplane.Frame
	if w.wanTX.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	hdr := w.outerLen(&ep)
	if !f.SetLen(hdr + len(c.Payload)) {
		w.count(DropNoBuffer, 1)
		w.wanTX.Free(fr[:])
		return
	}
	b := f.Data()
	copy(b[hdr:], c.Payload)
	port := c.SrcPort
	if port == 0 {
		port = w.e.cfg.ListenPort
	}
	w.putOuter(b, &ep, port, len(c.Payload))
	if ep.Dst.Addr().Is6() || w.e.cfg.IPv4UDPChecksum {
		w.udpChecksum(b, &ep)
	}
	if c.Peer != nil {
		pl := w.peerState(c.Peer)
		pl.lastSent = now
		pl.txBytes += uint64(len(c.Payload))
		w.markDirty(pl)
	}
	w.c.controlSent.Add(1)
	w.transmit(w.wanTX, fr[:])
}

// sendInner encrypts an inner packet from the exception interface.
func (w *worker) sendInner(p []byte, now int64) {
	rt := w.e.routes.Load()
	if header.ParseIP(p, &w.pkt) != header.OK {
		w.count(DropInnerMalformed, 1)
		return
	}
	peer, ok := rt.t.Lookup(w.pkt.Dst)
	if !ok {
		if w.pkt.Dst.IsMulticast() {
			w.count(DropHostMulticast, 1)
		} else {
			w.count(DropNoRoute, 1)
		}
		return
	}
	if len(p) > w.e.cfg.MTU {
		w.count(DropTooBig, 1)
		return
	}
	var fr [1]dataplane.Frame
	if w.lanTX.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	f.SetLen(len(p))
	copy(f.Data(), p)
	pl := w.peerState(peer)
	kp, ep := usable(peer, now)
	if kp == nil {
		w.hold(pl, f)
		return
	}
	first, granted := kp.ReserveNonces(1)
	if granted == 0 {
		w.count(DropNonceExhausted, 1)
		peer.HandshakeNeeded.Store(true)
		w.lanTX.Free(fr[:])
		return
	}
	pl.kp, pl.ep = kp, ep
	if !w.seal(f, pl, first) {
		w.count(DropNoBuffer, 1)
		w.lanTX.Free(fr[:])
		return
	}
	pl.lastSent, pl.lastDataSent = now, now
	pl.txBytes += uint64(f.Len() - w.outerLen(ep))
	w.markDirty(pl)
	w.c.encrypted.Add(1)
	w.c.encryptedBytes.Add(uint64(len(p)))
	w.transmit(w.wanTX, fr[:])
}

// publish writes the dirty peers' stamps and counters to the shared Peer
// (DESIGN.md: at most once per 50 ms per peer), and applies roaming.
func (w *worker) publish(now int64) {
	w.lastPublish = now
	for _, id := range w.dirtyPeers {
		if id >= len(w.local) {
			continue
		}
		pl := &w.local[id]
		p := pl.peer
		if p == nil {
			continue
		}
		storeMax(&p.Stamps.LastSent, pl.lastSent)
		storeMax(&p.Stamps.LastReceived, pl.lastReceived)
		storeMax(&p.Stamps.LastDataSent, pl.lastDataSent)
		storeMax(&p.Stamps.LastDataReceived, pl.lastDataReceived)
		if pl.txBytes > 0 {
			p.TxBytes.Add(pl.txBytes)
			pl.txBytes = 0
		}
		if pl.rxBytes > 0 {
			p.RxBytes.Add(pl.rxBytes)
			pl.rxBytes = 0
		}
		// Roaming (whitepaper §6.5 / DESIGN.md): move the endpoint to the
		// newest authenticated source only when nothing authenticated came
		// from the current endpoint during this interval, so that a peer
		// spreading its source ports does not make it flip per packet.
		if pl.lastSrc.IsValid() && !pl.sawCurrent {
			w.roam(pl)
		}
		pl.lastSrc = netip.AddrPort{}
		pl.sawCurrent = false
		pl.dirty = false
	}
	w.dirtyPeers = w.dirtyPeers[:0]
}

func (w *worker) roam(pl *peerLocal) {
	ep := &Endpoint{Dst: pl.lastSrc, Src: pl.lastDst, SrcMAC: w.wanMAC}
	if mac, ok := w.e.cfg.WANResolver.Resolve(pl.lastSrc.Addr()); ok {
		ep.DstMAC = mac
	} else {
		// The frame came from this MAC: the last hop toward the source.
		ep.DstMAC = pl.lastSrcMAC
	}
	pl.peer.Endpoint.Store(ep)
}

// isNeighbourFrame reports whether an untagged Ethernet frame is ARP or an
// ICMPv6 neighbour solicitation/advertisement without extension headers.
func isNeighbourFrame(d []byte) bool {
	if len(d) < header.EthernetLen {
		return false
	}
	switch binary.BigEndian.Uint16(d[12:14]) {
	case header.EtherTypeARP:
		return true
	case header.EtherTypeIPv6:
		const icmp = header.EthernetLen + header.IPv6Len
		return len(d) > icmp && d[header.EthernetLen+6] == header.ProtoICMPv6 &&
			(d[icmp] == ndpNeighbourSolicitation || d[icmp] == ndpNeighbourAdvertisement)
	}
	return false
}

// ICMPv6 types of RFC 4861 §4.3 and §4.4.
const (
	ndpNeighbourSolicitation  = 135
	ndpNeighbourAdvertisement = 136
)

// neighbour hands an ARP/NDP frame to h and transmits its reply on tx.
func (w *worker) neighbour(h NeighbourHandler, tx dataplane.TX, frame []byte) {
	w.c.neighbour.Add(1)
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	f.SetLen(f.Len() + f.Tailroom())
	n := h.Handle(frame, f.Data())
	if n <= 0 {
		tx.Free(fr[:])
		return
	}
	f.SetLen(n)
	w.transmit(tx, fr[:])
}

// sendRaw copies a whole frame from the control plane into a frame of tx's
// pool and transmits it.
func (w *worker) sendRaw(tx dataplane.TX, raw []byte) {
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	if !fr[0].SetLen(len(raw)) {
		w.count(DropNoBuffer, 1)
		tx.Free(fr[:])
		return
	}
	copy(fr[0].Data(), raw)
	w.c.controlSent.Add(1)
	w.transmit(tx, fr[:])
}

// unsafeOne views one frame as a slice of one without allocating.
func unsafeOne(f *dataplane.Frame) []dataplane.Frame {
	return unsafe.Slice(f, 1)
}
