package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
	"github.com/wgpio/wgpio/internal/pathmtu"
	"github.com/wgpio/wgpio/internal/plural"
	"github.com/wgpio/wgpio/protocol"
)

// Engine runs one worker per queue pair and offers the control plane its
// side: peers and allowed IPs, inbound handshake messages, and a mailbox
// per worker for outbound control packets.
//
// Methods are safe for concurrent use unless noted.
type Engine struct {
	cfg     Config
	now     func() int64
	workers []*worker

	peersMu sync.Mutex // serialises SetPeers / UpdatePeers (snapshot.go)
	routes  atomic.Pointer[routeTable]
	members map[*Peer]struct{}       // the peer set; guarded by peersMu
	freeIDs []int                    // IDs freed by removed peers; guarded by peersMu
	nextID  int                      // the lowest ID never given; guarded by peersMu
	wan     atomic.Pointer[wanState] // listen port and outer addresses (SetWAN)

	handshakes chan HandshakeMessage
	stamped    stampList // peers published since the control plane's last tick (stamped.go)

	indexes IndexTable
	// inAheadMin is inAheadMinIndexes (inahead.go); a test lowers it to
	// run the inbound look-ahead with a few sessions.
	inAheadMin int

	retire retirer // keypairs waiting for their keys to be erased (retire.go)
	// icmpLimit rate-limits time exceeded; shared by the workers.
	icmpLimit *icmprate.Limiter
	// mss4, mss6 are the MSS to clamp TCP SYNs to (0: no clamp).
	mss4, mss6 uint16
	// icmpSrc are the sources of the ICMP errors workers send (router.go;
	// set by New, SetLANAddrs and SetLANLinkLocal, which icmpSrcMu
	// serializes).
	icmpSrc   atomic.Pointer[icmpSources]
	icmpSrcMu sync.Mutex
	// lanMTU is the LAN port's MTU in bytes of IP packet (0 or less: no
	// limit known): decrypted packets larger than it are fragmented or
	// answered (router.go). Set by New from Config.LAN.MTU() and by
	// SetLANMTU; a worker loads it once per inbound burst.
	lanMTU atomic.Int64
	// wanMTU is the WAN port's MTU in bytes of IP packet (0 or less: no
	// limit known): outer packets larger than it leave as IP fragments
	// (wanfrag.go). Set by New from Config.WAN.MTU() and by SetWANMTU; a
	// worker loads it once per batch it sends to the WAN.
	wanMTU atomic.Int64
	// pathMTU is the path MTUs learnt toward IPv6 endpoints
	// (SetPathMTU; its Load nil: none): outer packets toward such an endpoint larger than its
	// path MTU leave as fragments too (wanfrag.go). A worker loads it
	// once per batch.
	pathMTU pathmtu.Table
	// reasm reassembles WAN fragments (Config.Reassemble, reassemble.go;
	// nil without).
	reasm *reassembler
	// maxOuter is the longest outer IP packet of a tunnel packet, bytes:
	// Config.MTU and the larger outer overhead, IPv6's (toWAN).
	maxOuter int
	// fragIDBase is where the workers' identifications start: of outer
	// IPv6 fragments (fwdState.fragID) and, its top 16 bits, of outer
	// IPv4 packets (worker.ipID). Random, set by New.
	fragIDBase uint32
	// lanLens is Config.LANResolver as a RouteLengths, or nil (hairpin.go).
	lanLens RouteLengths
	// kernelDrops is CountKernelSocketDrops' count (nil: none), read by
	// Stats.
	kernelDrops atomic.Pointer[func() uint64]

	wg      sync.WaitGroup
	closing atomic.Bool
	started bool
}

// HandshakeMessage is a handshake initiation, response or cookie reply
// (types 1–3) received on the WAN, handed to the control plane. Data is a
// copy the receiver owns.
type HandshakeMessage struct {
	Queue int
	// Src is the outer source, Dst the outer destination (our address).
	Src, Dst netip.AddrPort
	// SrcMAC is the Ethernet source of the frame (the last hop).
	SrcMAC [6]byte
	Data   []byte
	// Received is when the worker received it (Config.Now).
	Received int64
}

// ControlPacket is a message the control plane wants sent on the WAN: a
// handshake message, cookie reply or a sealed keepalive, as the UDP payload.
type ControlPacket struct {
	// Dst is the outer destination; an IPv4-mapped IPv6 address is sent
	// to as IPv4.
	Dst netip.AddrPort
	// Src is the outer source address: the WAN address the peer reached
	// us at (the handshake message's Dst, the endpoint's Src). Invalid,
	// of another family than Dst, or no longer one of the WAN's: the
	// default of Dst's family (Engine.SetWAN).
	Src netip.Addr
	// SrcPort is the outer source port (0: the listen port).
	SrcPort uint16
	// DstMAC is the next hop's MAC; zero to resolve through WANResolver.
	DstMAC [6]byte
	// Payload is the UDP payload; the engine copies it before Send returns.
	Payload []byte
	// Peer, if not nil, gets LastSent and TxBytes stamped. It must be
	// in the engine's set (UpdatePeers took it; or removed from it, its
	// Removed stored first): the worker that stamps it reads its ID,
	// which indexes the worker's per-peer state, and the engine writes
	// the ID when the peer joins, without synchronisation with the
	// workers. gateway.Device hands a peer to the engine before any
	// handshake can reach it (joinCreatedLocked).
	Peer *Peer
}

// New makes an engine on two ports. Start runs the workers. It returns
// an error, and makes nothing, for a Config without its required fields
// (LAN and WAN, ListenPort, a WAN address, both resolvers), a WAN address
// of the wrong family, ports of different queue counts, a VLAN over 4094, a tunnel MTU below the
// minimum, a Burst over MaxBurst or a CPU the process may not run on.
func New(cfg Config) (*Engine, error) {
	if cfg.LAN == nil || cfg.WAN == nil {
		return nil, errors.New("fastpath: LAN and WAN ports are required")
	}
	if cfg.LAN == cfg.WAN {
		return nil, fmt.Errorf("fastpath: LAN and WAN are the same port, %s: each queue half has one owner", cfg.LAN.Name())
	}
	if cfg.LAN.NumQueues() != cfg.WAN.NumQueues() {
		return nil, fmt.Errorf("fastpath: LAN %s has %s, WAN %s has %d; they must match",
			cfg.LAN.Name(), plural.Count(cfg.LAN.NumQueues(), "queue", "queues"), cfg.WAN.Name(), cfg.WAN.NumQueues())
	}
	if cfg.ListenPort == 0 {
		return nil, errors.New("fastpath: listen port is required")
	}
	if last := int(cfg.ListenPort) + max(int(cfg.SourcePorts), 1) - 1; last > 65535 {
		return nil, fmt.Errorf("fastpath: source ports %d-%d run past 65535 (ListenPort %d, SourcePorts %d)", cfg.ListenPort, last, cfg.ListenPort, cfg.SourcePorts)
	}
	if !cfg.WANAddr4.IsValid() && !cfg.WANAddr6.IsValid() {
		return nil, errors.New("fastpath: a WAN address is required")
	}
	if err := checkWANFamilies(cfg.WANAddr4, cfg.WANAddr6); err != nil {
		return nil, err
	}
	if cfg.WANResolver == nil || cfg.LANResolver == nil {
		return nil, errors.New("fastpath: WAN and LAN resolvers are required")
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.WANVLAN > 4094 || cfg.LANVLAN > 4094 {
		return nil, fmt.Errorf("fastpath: VLAN %d/%d (WAN/LAN): want 1-4094, or 0 for untagged", cfg.WANVLAN, cfg.LANVLAN)
	}
	if cfg.MTU < MinMTU {
		return nil, fmt.Errorf("fastpath: tunnel MTU %d below the minimum, %d (RFC 791)", cfg.MTU, MinMTU)
	}
	if cfg.MTU > MaxMTU {
		return nil, fmt.Errorf("fastpath: tunnel MTU %d above the maximum, %d (an outer IPv4 datagram holds 65,535 bytes)", cfg.MTU, MaxMTU)
	}
	if len(cfg.CPUs) > 0 {
		if err := checkCPUs(cfg.CPUs); err != nil {
			return nil, err
		}
	}
	if cfg.IdleSpin == 0 {
		cfg.IdleSpin = DefaultIdleSpin
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Burst > MaxBurst {
		return nil, fmt.Errorf("fastpath: burst of %d frames is over the limit of %d (Config.Burst)", cfg.Burst, MaxBurst)
	}
	if cfg.MaxHeldPerQueue <= 0 {
		cfg.MaxHeldPerQueue = DefaultMaxHeldPerQueue
	}
	e := &Engine{cfg: cfg, handshakes: make(chan HandshakeMessage, HandshakeQueueLen), inAheadMin: inAheadMinIndexes}
	e.stamped.wake = make(chan struct{}, 1)
	e.icmpLimit = icmprate.New(icmprate.Config{Rate: cfg.ICMPRate, Burst: cfg.ICMPBurst, DestInterval: cfg.ICMPDestInterval})
	e.lanMTU.Store(int64(cfg.LAN.MTU()))
	e.wanMTU.Store(int64(cfg.WAN.MTU()))
	e.fragIDBase = rand.Uint32()
	e.maxOuter = cfg.MTU + header.IPv6Len + header.UDPLen + protocol.TransportMinSize
	e.lanLens, _ = cfg.LANResolver.(RouteLengths)
	e.storeICMPSources(cfg.LANAddr4, cfg.LANAddr6, cfg.LANLinkLocal6, nil)
	switch {
	case cfg.MSSClamp == MSSClampAuto:
		e.mss4, e.mss6 = header.MSSForMTU(cfg.MTU, false), header.MSSForMTU(cfg.MTU, true)
	case cfg.MSSClamp > 0:
		e.mss4, e.mss6 = uint16(min(cfg.MSSClamp, 0xffff)), uint16(min(cfg.MSSClamp, 0xffff))
	}
	if cfg.Now == nil {
		start := time.Now()
		e.now = func() int64 { return int64(time.Since(start)) }
	} else {
		e.now = cfg.Now
	}
	if cfg.Reassemble {
		e.reasm = newReassembler()
	}
	e.routes.Store(newRouteTable(ownAddrs(cfg.TunnelAddrs, cfg.HostAddrs)))
	e.members = make(map[*Peer]struct{})
	e.wan.Store(newWANState(cfg.ListenPort, cfg.WANAddr4, cfg.WANAddr6, cfg.WANAddrs))
	for i := 0; i < cfg.LAN.NumQueues(); i++ {
		w, err := newWorker(e, i)
		if err != nil {
			for _, w := range e.workers {
				w.close()
			}
			return nil, err
		}
		e.workers = append(e.workers, w)
	}
	return e, nil
}

// Now is the engine's clock in ns.
func (e *Engine) Now() int64 { return e.now() }

// SetLANMTU sets the MTU, in bytes of IP packet, that decrypted transit
// packets are checked against on their way to the LAN (0 or less: no
// limit): a gateway calls it when its LAN interface's MTU changes (`ip
// link set DEV mtu N`), as a Linux router checks each forwarded packet
// against the outgoing device's MTU of the moment (RFC 1812 §5.3.1;
// net/ipv4/ip_forward.c). New reads Config.LAN.MTU() once. Workers use
// the new value from their next burst. Safe for concurrent use.
func (e *Engine) SetLANMTU(mtu int) { e.lanMTU.Store(int64(mtu)) }

// SetWANMTU sets the MTU, in bytes of IP packet, that the outer packets a
// worker sends to the WAN are checked against (0 or less: no limit): a
// gateway calls it when its WAN interface's MTU changes, as it bounds the
// WAN port (afxdp.Port.SetMTU). A larger outer packet is sent as IP
// fragments of at most mtu bytes (wanfrag.go): IPv4 with DF clear (RFC
// 791), IPv6 with a Fragment header (RFC 8200 §4.5), as the Linux kernel
// fragments what its WireGuard sends (which sets ignore_df on both
// families). New reads Config.WAN.MTU() once. Workers use the new value
// from their next batch. Safe for concurrent use.
func (e *Engine) SetWANMTU(mtu int) { e.wanMTU.Store(int64(mtu)) }

// MaxPathMTUs is how many endpoints' path MTUs SetPathMTU keeps at once.
const MaxPathMTUs = pathmtu.MaxEntries

// SetPathMTU sets the path MTU toward the IPv6 endpoint address dst, in
// bytes of IP packet, as an ICMPv6 "packet too big" from a router on the
// way reports it (RFC 8201 §4): an outer packet toward dst larger than mtu
// (and within the WAN MTU) is sent as IPv6 fragments of at most mtu bytes
// with a Fragment header, as Linux's WireGuard, whose kernel keeps the
// path MTU it learns in the route toward the endpoint, sends it. IPv6
// routers never fragment, so without it every full-size packet toward such
// a peer is lost. An mtu below 1,280 is taken as 1,280, the least IPv6
// link MTU (RFC 8200 §5; internal/toobig discards a "packet too big"
// reporting one, RFC 8201 §4); an mtu of 0 or less forgets dst's (the
// caller expires them, as Linux's net.ipv6.route.mtu_expires does). IPv4
// endpoints need none (our outer IPv4 header has DF clear: routers
// fragment it) and are ignored. It returns false, changing nothing, when
// MaxPathMTUs endpoints have one already. Workers use the new value from
// their next batch. Safe for concurrent use; it copies the table (a cost
// per change, not per packet).
func (e *Engine) SetPathMTU(dst netip.Addr, mtu int) bool { return e.pathMTU.Set(dst, mtu) }

// PathMTUs returns a copy of the path MTUs SetPathMTU set, by endpoint
// address (nil: none). Safe for concurrent use.
func (e *Engine) PathMTUs() map[netip.Addr]int { return e.pathMTU.All() }

// SetHostAddrs replaces Config.HostAddrs, the host's addresses whose
// packets from the tunnel go to the exception (e.g. after the WAN
// interface's address changed: DHCP). Workers use the new set from their
// next burst (one swap of the routing snapshot). Safe for concurrent use.
func (e *Engine) SetHostAddrs(addrs []netip.Addr) {
	e.peersMu.Lock()
	defer e.peersMu.Unlock()
	old := e.routes.Load()
	own := ownAddrs(e.cfg.TunnelAddrs, addrs)
	if maps.Equal(own, old.own) {
		return
	}
	e.routes.Store(withOwn(old.t, own))
	e.Kick()
}

// ownAddrs is the set of addresses whose packets from the tunnel are the
// host's (Config.TunnelAddrs and HostAddrs, IPv6 link-local ones left
// out), unmapped.
func ownAddrs(tunnel, host []netip.Addr) map[netip.Addr]struct{} {
	own := make(map[netip.Addr]struct{}, len(tunnel)+len(host))
	for _, a := range tunnel {
		own[a] = struct{}{}
	}
	for _, a := range host {
		if a = a.Unmap(); !a.IsLinkLocalUnicast() {
			own[a] = struct{}{}
		}
	}
	return own
}

// Indexes is the receiver-index table the control plane allocates from and
// publishes keypairs to.
func (e *Engine) Indexes() *IndexTable { return &e.indexes }

// NumWorkers is the number of workers (queues).
func (e *Engine) NumWorkers() int { return len(e.workers) }

// Ports returns Config.LAN and Config.WAN, the ports the engine runs on
// (and does not close).
func (e *Engine) Ports() (lan, wan dataplane.Port) { return e.cfg.LAN, e.cfg.WAN }

// Handshakes is the bounded queue of handshake messages (types 1–3) for
// the control plane. Workers never block on it: a message that finds it
// full is dropped and counted (DropHandshakeQueueFull). What it still
// holds at Close is dropped, counted closed by the worker that received
// it.
func (e *Engine) Handshakes() <-chan HandshakeMessage { return e.handshakes }

// dropHandshakes empties the handshake queue at Close, once no worker
// fills it, counting each message closed on its worker's counters. A
// control plane still reading takes some first: each message is either
// its, or counted here.
func (e *Engine) dropHandshakes() {
	for {
		select {
		case m := <-e.handshakes:
			e.workers[uint(m.Queue)%uint(len(e.workers))].count(DropClosed, 1)
		default:
			return
		}
	}
}

// UnderLoad reports whether the handshake queue is at least 1/8 full (the
// first half of wireguard-go's and the kernel's "under load" rule; the
// control plane holds the state for one second after).
func (e *Engine) UnderLoad() bool { return len(e.handshakes) >= HandshakeQueueLen/8 }

// Send posts a control packet to worker queue's mailbox (queue is taken
// modulo the number of workers) and wakes the worker. After Close it, and
// SendTunnel, ReceiveWAN and SendFrame, return false at once (those three
// count the refusal closed on queue's worker; Send leaves it to its
// caller, as a full mailbox). It copies pkt.Payload. It returns false if
// the mailbox is full, uncounted: the caller counts the packet it could
// not send (gateway's mailbox_full, or closed when Closed says true), so
// that one drop is counted once.
func (e *Engine) Send(queue int, pkt ControlPacket) bool {
	if e.closing.Load() {
		return false // no worker would take it (uncounted)
	}
	w := e.workers[uint(queue)%uint(len(e.workers))]
	pkt.Payload = append([]byte(nil), pkt.Payload...)
	select {
	case w.mailbox <- mail{ctl: pkt}:
		w.waiter.Ring()
		return true
	default:
		return false
	}
}

// Closed reports whether Close has begun: from then on Send, SendWait,
// SendTunnel, ReceiveWAN and SendFrame refuse everything; the
// configuration calls (SetPeers, UpdatePeers, SetWAN, ...) are not
// refused for it (their own checks still apply), their changes kept by
// an engine no worker runs. A caller that
// counts Send's refusals (gateway) asks it to count a refusal closed, not
// mailbox_full. Safe for concurrent use.
func (e *Engine) Closed() bool { return e.closing.Load() }

// FlowHash is the hash of an inner IP packet's flow (addresses, protocol,
// and TCP/UDP ports when the packet is not a fragment) that picks its outer
// source port: packets of one flow hash alike. p is only read.
func FlowHash(p []byte) uint32 { return flowHash(p) }

// SendTunnel posts an inner IP packet from the host (the exception
// interface) to be encrypted and sent to the peer its destination routes to,
// by worker queue (taken modulo the number of workers, as in Send; the
// Exception callback is not told its worker's queue). It copies pkt. It
// returns false, counted, if the mailbox is full (mailbox_full) or the
// engine is closing (closed).
func (e *Engine) SendTunnel(queue int, pkt []byte) bool {
	w := e.workers[uint(queue)%uint(len(e.workers))]
	if e.closing.Load() {
		w.count(DropClosed, 1) // no worker would take it
		return false
	}
	select {
	case w.mailbox <- mail{kind: mailInner, inner: append([]byte(nil), pkt...)}:
		w.waiter.Ring()
		return true
	default:
		w.count(DropMailboxFull, 1)
		return false
	}
}

// ReceiveWAN hands the worker of queue (modulo the number of workers, as
// in Send; transport data of a session a worker has received: that
// worker's, kernelWorker) a WireGuard message, the payload msg
// of a UDP datagram from src to dst (our address and port), that reached
// the WAN outside the ports: one the host kernel reassembled from IP
// fragments (the XDP program passes fragments to the kernel, which
// delivers the datagram to a socket on our port), or one with IPv4 options
// or IPv6 extension headers. The worker handles it as a frame it received
// (counted in QueueStats.FromKernel; what it drops, by reason). It copies
// msg. It returns false, counted, if the mailbox is full (mailbox_full)
// or the engine is closing (closed: a kernel socket still read while the
// gateway stops).
func (e *Engine) ReceiveWAN(queue int, src, dst netip.AddrPort, msg []byte) bool {
	w := e.kernelWorker(queue, msg)
	if e.closing.Load() {
		w.count(DropClosed, 1) // no worker would take it
		return false
	}
	select {
	case w.mailbox <- mail{kind: mailWAN, wan: append([]byte(nil), msg...), wanSrc: src, wanDst: dst}:
		w.waiter.Ring()
		return true
	default:
		w.count(DropMailboxFull, 1)
		return false
	}
}

// kernelWorker is the worker for msg, a WireGuard message that came
// through the host kernel (ReceiveWAN): for transport data of a session
// whose counters a worker has checked, that worker (the replay window's
// first queue), else the worker of queue. A peer whose large packets
// arrive as IP fragments (its path MTU below them) has them reassembled
// by the kernel and its others received on the RSS queue of their flow;
// handed to the worker of their source port, they were checked as from a
// second queue, which widened the session's Auto window (16 KiB instead
// of 1 KiB) and sent the peer's next sessions out wide too. Not on the
// fast path: the kernel's sockets call it, for the rare datagram that
// missed the ports.
func (e *Engine) kernelWorker(queue int, msg []byte) *worker {
	if len(msg) >= protocol.TransportMinSize && binary.LittleEndian.Uint32(msg) == protocol.TypeTransport {
		if kp := e.indexes.Lookup(binary.LittleEndian.Uint32(msg[protocol.TransportOffsetReceiver:])); kp != nil {
			if r := kp.replay.Load(); r != nil {
				if q, ok := r.FirstQueue(); ok && q < len(e.workers) {
					return e.workers[q]
				}
			}
		}
	}
	return e.workers[uint(queue)%uint(len(e.workers))]
}

// WorkerThreads returns the OS thread IDs of the running workers (0 for a
// worker not started or shared, threads.go), e.g. to read their context
// switches from /proc/self/task/TID/status or to move them with
// sched_setaffinity. Linux only: elsewhere every ID is 0.
func (e *Engine) WorkerThreads() []int {
	out := make([]int, len(e.workers))
	for i, w := range e.workers {
		out[i] = int(w.tid.Load())
	}
	return out
}

// SendFrame posts a whole Ethernet frame (an ARP request or neighbour
// solicitation of the owned address mode) to be transmitted on the LAN
// (lan) or WAN port by worker queue (modulo the number of workers, as in
// Send). It copies frame and returns false, counted, if the mailbox is
// full (mailbox_full), the engine is closing (closed) or frame is shorter
// than an Ethernet header (malformed). Safe for
// concurrent use; never blocks.
func (e *Engine) SendFrame(lan bool, queue int, frame []byte) bool {
	w := e.workers[uint(queue)%uint(len(e.workers))]
	if e.closing.Load() {
		w.count(DropClosed, 1) // no worker would take it
		return false
	}
	if len(frame) < header.EthernetLen {
		w.count(DropMalformed, 1) // no frame: it would leave as a runt
		return false
	}
	select {
	case w.mailbox <- mail{kind: mailRaw, raw: append([]byte(nil), frame...), rawLAN: lan}:
		w.waiter.Ring()
		return true
	default:
		w.count(DropMailboxFull, 1)
		return false
	}
}

// Kick wakes every worker (after keypairs or endpoints changed, so that
// held packets go out).
func (e *Engine) Kick() {
	for _, w := range e.workers {
		w.waiter.Ring()
	}
}

// Start runs the workers, one goroutine per queue: each owns a locked
// (and, with Config.CPUs, pinned) OS thread or shares the Go scheduler's,
// as Config.CPUs and Config.Share say. Call it once, before Close (a
// second call does nothing), and not concurrently with Close.
func (e *Engine) Start() {
	if e.started {
		return
	}
	e.started = true
	if e.reasm != nil {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.runReassembly()
		}()
	}
	for _, w := range e.workers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			w.run()
		}()
	}
}

// Close stops the workers and waits for them, frees held frames (counted
// closed, as the mail no worker took and the handshake messages no control
// plane took), erases the keys of every retired keypair (Retire) and
// returns; its peers may then join another engine. It does not close the
// ports.
func (e *Engine) Close() error {
	if !e.closing.CompareAndSwap(false, true) {
		return nil
	}
	e.Kick()
	if e.reasm != nil {
		close(e.reasm.done)
	}
	e.wg.Wait()
	if c := e.workers[0].capture.Load(); c != nil {
		c.detach() // its reader returns
	}
	for _, w := range e.workers {
		w.close()
	}
	e.dropHandshakes()
	e.Reap() // every worker is parked now
	e.peersMu.Lock()
	for p := range e.members {
		p.engine.CompareAndSwap(e, nil) // free to join another engine
	}
	e.peersMu.Unlock()
	return nil
}
