package bind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/counts"
	"github.com/wgpio/wgpio/internal/pathmtu"
)

// BatchSize is the number of datagrams a ReceiveFunc fills and Send takes
// at most per call: wireguard-go's conn.IdealBatchSize, which is within the
// queues' burst (dataplane.MaxBurst).
const BatchSize = min(conn.IdealBatchSize, dataplane.MaxBurst)

// DefaultResolveWait is how long Send waits for a next hop's MAC to
// resolve before it drops the batch (Config.ResolveWait).
const DefaultResolveWait = time.Second

// maxEndpoints bounds each receive queue's endpoint cache; a full cache is
// emptied (a flood of spoofed sources costs allocations, never memory).
const maxEndpoints = 4096

// Config configures a Bind.
type Config struct {
	// Port is the WAN port. The Bind uses every queue of it and does not
	// close it.
	Port dataplane.Port
	// Addr4 and Addr6 are the addresses the Bind listens on and sends
	// from at first (SetAddrs replaces them); at least one must be valid.
	// Datagrams to other addresses are dropped and counted.
	Addr4, Addr6 netip.Addr
	// Addrs are the interface's further addresses (a keepalived virtual
	// address), taken too and answered from (local.go; SetAddrs
	// replaces them).
	Addrs []netip.Addr
	// ListenPort is the UDP port the Bind listens on and sends from at
	// first. Open(0) keeps the port it has; Open with another port moves
	// it there through Move.
	ListenPort uint16
	// Move points what delivers the port's datagrams (the XDP filter's
	// UDP match) at port, a nonzero port other than the one the Bind
	// listens on, or returns why it cannot (EADDRINUSE: the host uses
	// it), in which case the Bind stays on its port. wireguard-go calls
	// Open with the new port after Close when listen_port is set (wg set
	// NAME listen-port N); Move runs in that Open, the Bind closed. Nil:
	// Open refuses another port.
	Move func(port uint16) error
	// Source, if set, gives the source the kernel's route toward dst
	// chooses (see RouteSources): an endpoint not heard from (configured,
	// or whose source is no longer the Bind's) is sent to from it while
	// it is one of the Bind's addresses of dst's family, else from the
	// default of the family, as Linux's WireGuard sends with its route
	// lookup's source (drivers/net/wireguard/socket.c). The answer is
	// kept on the endpoint, as the kernel keeps it in the peer's
	// dst_cache: Send asks the kernel (Source.Source, a netlink round
	// trip) only for an endpoint never answered, whose question
	// ParseEndpoint already queued (Source.Ask); after a change of
	// routes it sends from the endpoint's previous answer until a cached
	// one is there, and has it asked in the background meanwhile.
	Source RouteSources
	// Routes gives the next hop towards an endpoint (arp.KernelRoutes in
	// shared mode, arp.StaticRoutes in owned mode). It must describe this
	// port's interface: the interface index it returns is not checked.
	Routes arp.Resolver
	// Neighbours holds the next hops' MACs.
	Neighbours *arp.Table
	// Responder, in owned mode, answers the ARP requests and neighbour
	// solicitations for Addr4 and Addr6 that arrive on the port (the XDP
	// filter must redirect them: afxdp.Filter.Neighbours). Nil in shared
	// mode, where the kernel answers.
	Responder *arp.Responder
	// ChecksumIPv4 computes the UDP checksum of IPv4 datagrams; without it
	// they carry 0, "no checksum" (RFC 768), as WireGuard's own
	// authentication covers every message. IPv6 datagrams always carry a
	// checksum (RFC 8200 §8.1).
	ChecksumIPv4 bool
	// VerifyChecksum verifies the UDP checksum of received datagrams and
	// drops those that fail (DropBadChecksum). Off by default: every
	// WireGuard message is authenticated (the Poly1305 tag of transport
	// data, whitepaper §5.4.6; MAC1 of handshake messages, §5.4.4), so a
	// corrupted datagram is rejected by wireguard-go anyway. A zero
	// checksum is accepted on IPv4 (RFC 768) and always dropped on IPv6
	// (RFC 8200 §8.1, header.ReasonUDPZeroChecksum), verified or not.
	VerifyChecksum bool
	// Screen drops received datagrams that are no WireGuard message stock
	// wireguard-go takes (its RoutineReceiveIncoming drops them, counting
	// nothing), so that they are counted: a type other than 1-4 in the
	// little-endian first word (three reserved zero bytes, whitepaper
	// §5.4; DropBadType), transport data shorter than its header and tag
	// (32 bytes, §5.4.6; DropShortData), a handshake message of another
	// size than its type's (148, 92, 64 bytes, §5.4.2, §5.4.3, §5.4.7;
	// DropWrongSize). Off by default: the Bind carries any UDP payload.
	Screen bool
	// ResolveWait bounds how long Send waits for an unresolved next hop
	// (default DefaultResolveWait); it waits before taking a TX queue, so
	// other senders are not held up.
	ResolveWait time.Duration
	// TTL is the IPv4 TTL and IPv6 hop limit (0: 64).
	TTL uint8
}

// XDPFilter returns the afxdp filter for a WAN port of a Bind listening on
// addrs and port: UDP to one of the addresses and exactly that port is
// redirected, everything else is passed to the kernel. With owned true the
// ARP and NDP frames for addrs are redirected too (owned address mode).
func XDPFilter(addrs []netip.Addr, port uint16, owned bool) afxdp.Filter {
	var f afxdp.Filter
	for _, a := range addrs {
		if a.IsValid() {
			f.UDP = append(f.UDP, afxdp.UDPMatch{Addr: a, PortLo: port, PortHi: port})
			if owned {
				f.Neighbours = append(f.Neighbours, a)
			}
		}
	}
	return f
}

// Errors returned by Send, Open and SendFrame; test with errors.Is.
var (
	ErrNoRoute     = errors.New("bind: no route to endpoint")
	ErrNoNeighbour = errors.New("bind: next hop did not resolve")
	ErrNoAddress   = errors.New("bind: no local address of the endpoint's family")
	ErrNoBuffer    = errors.New("bind: no free frame")
)

// Bind is a conn.Bind over a dataplane port.
//
// Receiving: Open returns one ReceiveFunc per queue; each owns its queue's
// RX half and must be called by one goroutine at a time (wireguard-go runs
// one per function). Sending: Send is safe for concurrent use. Each queue's
// TX half is guarded by a mutex taken once per Send call (per batch, never
// per datagram); a sender takes the first free TX queue, trying them in
// turn from a rotating start (one atomic add per batch), and waits only when
// every queue is busy. The lock order is the neighbour table's lock, then a
// TX queue's: Send resolves next hops before it takes a TX queue, so an
// arp.FrameProber may call SendFrame from under the table's lock.
type Bind struct {
	cfg  Config
	mac  header.MAC
	txqs []*txQueue

	closedFlag atomic.Bool                // true while no generation is open
	port       atomic.Uint32              // the UDP port listened on and sent from; written under mu by Open
	local      atomic.Pointer[localAddrs] // the addresses listened on and sent from (SetAddrs)
	pathMTU    pathmtu.Table              // the path MTUs toward IPv6 endpoints (SetPathMTU); loaded once per batch

	mu   sync.Mutex // guards gen, and serialises Open and Close
	gen  *generation
	stat struct { // counters of closed generations
		rx DropCounts
		rp header.ReasonCounts
		n  uint64
		k  uint64 // of n, from ReceiveKernel
		nr uint64 // neighbour replies
	}
	// kq holds ReceiveKernel's datagrams for the receive functions
	// (kernel.go); it outlives the generations.
	kq kernelQueues
	// kernelDrops is CountKernelSocketDrops' count (nil: none), read by
	// Stats.
	kernelDrops atomic.Pointer[func() uint64]
}

var _ conn.Bind = (*Bind)(nil)

// SetAddrs replaces the addresses the Bind listens on and sends from
// (Config.Addr4, Addr6 and Addrs at first; an invalid v4 or v6: none of
// that family; others: the further addresses, local.go), for a WAN
// interface renumbered, or given an address or losing one, while the
// gateway runs. The caller points the XDP filter at them too. Datagrams in
// a burst being received are judged by the addresses of its start; an
// endpoint whose source is no longer the Bind's is sent to from the
// default of its family. Safe for concurrent use.
func (b *Bind) SetAddrs(v4, v6 netip.Addr, others ...netip.Addr) {
	b.local.Store(newLocalAddrs(v4, v6, others))
}

// generation is the state of one Open..Close.
type generation struct {
	closed atomic.Bool
	port   uint16 // the listen port of this generation, fixed
	rxs    []*rxQueue
}

// txQueue is one queue's TX half, shared by senders under mu.
type txQueue struct {
	mu     sync.Mutex
	tx     dataplane.TX
	frames []dataplane.Frame // scratch, guarded by mu: a batch's frames, BatchSize long
	// out is the frames a batch transmits, in order (guarded by mu):
	// the datagrams sent whole and the fragments of the others
	// (fragment.go), BatchSize + maxFragments long; groups[:ngroups]
	// say which of them are the fragments of one datagram.
	out     []dataplane.Frame
	groups  [maxGroups]fragGroup
	ngroups int
	// ipID is the identification of the last IPv4 datagram sent from
	// this queue (guarded by mu): one a datagram, so that a router that
	// fragments them (DF is clear) has fragments to tell apart (RFC 791,
	// RFC 6864 §4.1), and so that the Bind's own fragments (fragment.go)
	// have it. A destination always takes the same queue (takeTX), so
	// its datagrams' identifications repeat only after 65,536 of them.
	ipID uint16
	// ip6ID is the identification of the last IPv6 datagram this queue
	// sent as fragments (guarded by mu; RFC 8200 §4.5: unique among the
	// source's recent fragmented packets to a destination, which always
	// takes this queue), one more a fragmented datagram from a random
	// start, so that no one predicts it from outside (RFC 7739). The
	// destinations of one queue share the counter: one of them that
	// receives fragments sees the sequence the others get.
	ip6ID uint32
	f4    header.IPv4Fragmenter // guarded by mu
	f6    header.IPv6Fragmenter // guarded by mu
	ctr   txCounters
}

type txCounters struct {
	packets    atomic.Uint64 // datagrams transmitted, whole or as every one of their fragments
	fragmented atomic.Uint64 // datagrams transmitted as fragments
	fragments  atomic.Uint64 // fragment frames transmitted
	drops      counts.Atomic[DropReason]
}

// New returns a closed Bind over cfg.Port; wireguard-go opens it.
func New(cfg Config) (*Bind, error) {
	switch {
	case cfg.Port == nil:
		return nil, errors.New("bind: no port")
	case !cfg.Addr4.IsValid() && !cfg.Addr6.IsValid():
		return nil, errors.New("bind: no listen address")
	case cfg.Addr4.IsValid() && !cfg.Addr4.Unmap().Is4():
		return nil, fmt.Errorf("bind: Addr4 %v is not an IPv4 address", cfg.Addr4)
	case cfg.Addr6.IsValid() && !cfg.Addr6.Is6():
		return nil, fmt.Errorf("bind: Addr6 %v is not an IPv6 address", cfg.Addr6)
	case cfg.ListenPort == 0:
		return nil, errors.New("bind: listen port 0 (the XDP filter needs a fixed port)")
	case cfg.Routes == nil || cfg.Neighbours == nil:
		return nil, errors.New("bind: no routes or neighbour table")
	case len(cfg.Port.MAC()) != header.MACLen:
		return nil, fmt.Errorf("bind: port MAC %v is not 6 bytes", cfg.Port.MAC())
	}
	cfg.Addr4 = cfg.Addr4.Unmap()
	if cfg.ResolveWait <= 0 {
		cfg.ResolveWait = DefaultResolveWait
	}
	b := &Bind{cfg: cfg, mac: header.MAC(cfg.Port.MAC())}
	b.closedFlag.Store(true)
	b.port.Store(uint32(cfg.ListenPort))
	b.SetAddrs(cfg.Addr4, cfg.Addr6, cfg.Addrs...)
	b.kq.init(cfg.Port.NumQueues())
	for i := range cfg.Port.NumQueues() {
		b.txqs = append(b.txqs, &txQueue{tx: cfg.Port.Queue(i).TX(), frames: make([]dataplane.Frame, BatchSize),
			out: make([]dataplane.Frame, BatchSize+maxFragments), ip6ID: rand.Uint32()})
	}
	return b, nil
}

// Open starts listening and returns one ReceiveFunc per queue and the
// port listened on. port 0 keeps the port the Bind has (Config.ListenPort
// at first); another port is moved to through Config.Move, and without
// Move refused. It returns conn.ErrBindAlreadyOpen if open.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	cur := uint16(b.port.Load())
	if port != 0 && port != cur {
		if b.cfg.Move == nil {
			return nil, 0, fmt.Errorf("bind: listen port %d asked, but the port filters %d (set listen_port to it)", port, cur)
		}
		if err := b.cfg.Move(port); err != nil {
			return nil, 0, fmt.Errorf("bind: move listen port %d to %d: %w", cur, port, err)
		}
		b.port.Store(uint32(port))
		cur = port
	}
	g := &generation{port: cur}
	fns := make([]conn.ReceiveFunc, 0, b.cfg.Port.NumQueues())
	wake := make([]*dataplane.Waiter, 0, b.cfg.Port.NumQueues())
	for i := range b.cfg.Port.NumQueues() {
		w, err := dataplane.NewWaiter()
		if err != nil {
			for _, r := range g.rxs {
				r.w.Close()
			}
			return nil, 0, fmt.Errorf("bind: open: %w", err)
		}
		rx := b.cfg.Port.Queue(i).RX()
		w.Add(rx)
		r := &rxQueue{
			b: b, g: g, rx: rx, w: w, spin: dataplane.NewSpinner(dataplane.DefaultSpin, dataplane.MinSpin),
			frames: make([]dataplane.Frame, BatchSize),
			eps:    make(map[epKey]*Endpoint),
			reply:  make([]byte, arp.NDPFrameLen),
			kernel: b.kq.ready[i],
		}
		g.rxs = append(g.rxs, r)
		fns = append(fns, r.receive)
		wake = append(wake, w)
	}
	b.kq.setWake(wake)
	b.gen = g
	b.closedFlag.Store(false)
	return fns, cur, nil
}

// Close stops listening: every ReceiveFunc of this Open, blocked or not,
// returns net.ErrClosed from now on, and Close waits for the ones inside a
// call to leave, so that the RX halves are free for the next Open. The port
// stays open. Close of a closed Bind returns nil.
func (b *Bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gen
	if g == nil {
		return nil
	}
	b.gen = nil
	b.closedFlag.Store(true)
	g.closed.Store(true)
	b.kq.setWake(nil) // no Ring from ReceiveKernel once the waiters close
	for _, r := range g.rxs {
		r.w.Ring()
	}
	var errs []error
	for _, r := range g.rxs {
		r.mu.Lock()
		if err := r.w.Close(); err != nil {
			errs = append(errs, err)
		}
		r.ctr.drops.LoadAdd(&b.stat.rx)
		r.ctr.parse.LoadAdd(&b.stat.rp)
		b.stat.n += r.ctr.packets.Load()
		b.stat.k += r.ctr.fromKernel.Load()
		b.stat.nr += r.ctr.replies.Load()
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// SetMark does nothing and returns nil: no socket carries the datagrams,
// so there is nothing to mark (SO_MARK steers kernel routing, which these
// frames do not go through).
func (b *Bind) SetMark(uint32) error { return nil }

// BatchSize returns BatchSize.
func (b *Bind) BatchSize() int { return BatchSize }

// ParseEndpoint parses "ip:port" or "[ip6]:port" (IPv4-mapped addresses
// are unmapped). The result is an *Endpoint.
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, fmt.Errorf("bind: parse endpoint: %w", err)
	}
	e := b.newEndpoint(ap, netip.Addr{})
	if b.cfg.Source != nil {
		b.cfg.Source.Ask(e.dst.Addr()) // answered before its first Send, mostly
	}
	return e, nil
}

// newEndpoint makes the endpoint of ap whose source is local (a datagram
// from ap was sent to it), or, invalid, none (a configured endpoint: Send
// asks the route, Config.Source).
func (b *Bind) newEndpoint(ap netip.AddrPort, local netip.Addr) *Endpoint {
	a := ap.Addr().Unmap().WithZone("")
	return &Endpoint{dst: netip.AddrPortFrom(a, ap.Port()), src: local, srcPort: uint16(b.port.Load())}
}

// Endpoint is a peer's address and port, and the local address datagrams
// to it come from: the one the peer's datagram was sent to (one of the
// Bind's addresses, local.go), or for a configured endpoint none (Send
// sends from the source the route chooses). Immutable but for the
// route's answer kept on it (route.go), so the receive path hands out
// cached ones: the same *Endpoint may be held by several peers and
// goroutines.
type Endpoint struct {
	dst     netip.AddrPort
	src     netip.Addr
	srcPort uint16
	route   atomic.Pointer[routeAnswer] // nil: never asked
}

var _ conn.Endpoint = (*Endpoint)(nil)

// ClearSrc does nothing: an Endpoint is immutable and shared, and Send
// already sends from the source the route chooses whenever the
// endpoint's source is no longer one of the Bind's (what clearing the
// source achieves on wireguard-go's StdNetBind).
func (e *Endpoint) ClearSrc() {}

// SrcToString returns the local address and port.
func (e *Endpoint) SrcToString() string {
	if !e.src.IsValid() {
		return ""
	}
	return netip.AddrPortFrom(e.src, e.srcPort).String()
}

// DstToString returns the peer's address and port.
func (e *Endpoint) DstToString() string { return e.dst.String() }

// DstToBytes returns the peer's address (4 or 16 bytes) followed by its
// port, big-endian: the source identity wireguard-go's cookie MAC2 covers
// (whitepaper §5.4.7). It allocates.
func (e *Endpoint) DstToBytes() []byte {
	b := e.dst.Addr().AsSlice()
	return append(b, byte(e.dst.Port()>>8), byte(e.dst.Port()))
}

// DstIP returns the peer's address.
func (e *Endpoint) DstIP() netip.Addr { return e.dst.Addr() }

// SrcIP returns the local address.
func (e *Endpoint) SrcIP() netip.Addr { return e.src }

// AddrPort returns the peer's address and port.
func (e *Endpoint) AddrPort() netip.AddrPort { return e.dst }

// nextHop returns the MAC that frames to dst carry. The fast path is two
// lock-free lookups; a miss asks the table to resolve and polls for up to
// ResolveWait.
func (b *Bind) nextHop(dst netip.Addr) (header.MAC, DropReason, error) {
	nh, _, ok := b.cfg.Routes.NextHop(dst)
	if !ok {
		return header.MAC{}, DropNoWANRoute, fmt.Errorf("%w %v", ErrNoRoute, dst)
	}
	if mac, ok := b.cfg.Neighbours.Lookup(nh); ok {
		return header.MAC(mac), 0, nil
	}
	mac, err := resolve(b.cfg.Neighbours, nh, b.cfg.ResolveWait)
	if err != nil {
		return header.MAC{}, DropNoNeighbour, fmt.Errorf("%w: %v via %v: %w", ErrNoNeighbour, dst, nh, err)
	}
	return mac, 0, nil
}

// errResolveTimeout and errResolveFailed say why resolve gave up.
var (
	errResolveTimeout = errors.New("no answer in time")
	errResolveFailed  = errors.New("neighbour failed or table full")
)

// resolve asks t for ip's MAC and polls for it until wait has passed.
func resolve(t *arp.Table, ip netip.Addr, wait time.Duration) (header.MAC, error) {
	deadline := time.Now().Add(wait)
	for sleep := 100 * time.Microsecond; ; sleep = min(2*sleep, 10*time.Millisecond) {
		switch t.Resolve(ip) {
		case arp.StateFailed, arp.StateNone:
			return header.MAC{}, errResolveFailed
		}
		if mac, ok := t.Lookup(ip); ok {
			return header.MAC(mac), nil
		}
		if time.Now().After(deadline) {
			return header.MAC{}, errResolveTimeout
		}
		time.Sleep(sleep)
	}
}

// takeTX returns the TX queue for dst with its mutex held (one lock per
// batch). A destination always takes the same queue: wireguard-go sends a
// peer's packets in order from one goroutine, and on links where the
// receiver's RX queue follows the sender's TX queue (veth), spreading one
// peer over queues would reorder its packets at the far end.
func (b *Bind) takeTX(dst netip.AddrPort) *txQueue {
	n := uint32(len(b.txqs))
	q := b.txqs[0]
	if n > 1 {
		a := dst.Addr().As16()
		h := binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(a[:8]) ^ uint64(dst.Port())
		h *= 0x9e3779b97f4a7c15
		q = b.txqs[uint32(h>>32)%n]
	}
	q.mu.Lock()
	return q
}

// Send sends each of bufs as one UDP datagram to ep (an *Endpoint) from
// ep's source address (local.go; the Bind's default of ep's family when
// it is none or no longer the Bind's) and the listen port, BatchSize at a
// time (wireguard-go hands at most that many; more are sent in several
// batches, each on the TX queue it takes). Send does not keep bufs. It is
// safe for concurrent use and does not allocate on the hot path, nor to
// fragment. A datagram longer than the port's MTU (dataplane.Port.MTU,
// read once per batch), or than the path MTU toward an IPv6 endpoint
// (SetPathMTU, looked up once per batch), is sent as IP fragments of at
// most that MTU, in
// order between the datagrams before and after it, as Linux fragments
// its WireGuard's outer packets (which carry ignore_df): IPv4 fragments
// with the datagram's identification (its DF is clear; RFC 791 §3.2),
// IPv6 ones with a Fragment header (RFC 8200 §4.5) and an identification
// of the TX queue's, one more a datagram from a random start (RFC 7739);
// counted in Stats.Fragmented and Fragments.
// Errors: net.ErrClosed after Close, conn.ErrWrongEndpointType,
// ErrNoAddress, ErrNoRoute, ErrNoNeighbour (the batch is dropped and
// counted), ErrNoBuffer (the pool ran dry: each datagram that found no
// frame, or lacked one for one of its fragments, is dropped and counted;
// the others go, in batches of BatchSize past the first short one too). A datagram that cannot be sent at all (longer
// than a frame holds or than UDP carries, 65,507 bytes over IPv4 and
// 65,527 over IPv6, or needing more than 64 fragments or an MTU too
// small for any) is dropped and counted (DropTooBig) without an error.
// Datagrams the TX ring has no room for, even after reclaiming
// completions, are dropped and counted (DropTXFull) without an error, as a
// full qdisc drops. With no bufs Send does nothing and returns nil (but
// conn.ErrWrongEndpointType), closed or not: it neither resolves ep nor
// waits (gateway/compatgw asks wireguard-go whether a peer has an
// endpoint with an empty send).
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(*Endpoint)
	if !ok || e == nil {
		return conn.ErrWrongEndpointType
	}
	if len(bufs) == 0 {
		return nil
	}
	if b.isClosedFast() {
		return net.ErrClosed
	}
	dst := e.dst.Addr()
	v4 := dst.Is4()
	src := b.local.Load().source(e, dst, b.cfg.Source)
	if !src.IsValid() {
		b.txqs[0].ctr.drops[DropNoWANAddress].Add(uint64(len(bufs)))
		return fmt.Errorf("%w: %v", ErrNoAddress, dst)
	}
	mac, reason, err := b.nextHop(dst)
	if err != nil {
		q := b.txqs[0]
		q.ctr.drops[reason].Add(uint64(len(bufs)))
		return err
	}
	// Every batch is sent, or dropped and counted, whatever the one
	// before met: returning at a batch short of frames left the batches
	// after it neither sent nor counted.
	var first error
	for len(bufs) > 0 {
		n := min(len(bufs), BatchSize)
		if err := b.sendBatch(bufs[:n], mac, src, e.dst, v4); err != nil && first == nil {
			first = err
		}
		bufs = bufs[n:]
	}
	return first
}

// isClosedFast reports whether the Bind is closed, without the lock: a
// Send racing with Close may still go out, as on a socket.
func (b *Bind) isClosedFast() bool {
	return b.closedFlag.Load()
}

// sendBatch builds and transmits up to BatchSize datagrams on one TX
// queue, in order: a datagram longer than the port's MTU (or dst's path
// MTU, SetPathMTU) goes out as its
// fragments (fragment.go) between the ones before and after it; q.out is
// transmitted early when the next frames do not fit behind it. A
// datagram that fits costs what it did: its one comparison with the MTU
// was build's.
func (b *Bind) sendBatch(bufs [][]byte, mac header.MAC, src netip.Addr, dst netip.AddrPort, v4 bool) error {
	t := b.template(mac, src, dst, v4)
	q := b.takeTX(dst)
	defer q.mu.Unlock()
	got := q.tx.Alloc(q.frames[:len(bufs)])
	var err error
	if got < len(bufs) {
		q.ctr.drops[DropNoBuffer].Add(uint64(len(bufs) - got))
		err = ErrNoBuffer
	}
	frames := q.frames[:got]
	t.mtu = b.cfg.Port.MTU()
	if !v4 {
		if pm := b.pathMTU.Load(); pm != nil && pm.Least < t.mtu {
			if m, ok := pm.Lookup(dst.Addr()); ok && m < t.mtu {
				t.mtu = m
			}
		}
	}
	whole := t.mtu - (t.n - header.EthernetLen) // the longest payload sent whole
	k := 0                                      // q.out[:k] are ready to transmit
	for i := range frames {
		if len(bufs[i]) > whole {
			var short bool
			if k, short = b.fragment(q, frames[i:i+1], bufs[i], &t, k); short {
				err = ErrNoBuffer
			}
			continue
		}
		if b.build(&frames[i], bufs[i], &t, q.ipID+1) {
			if t.v4 {
				q.ipID++
			}
			if k == len(q.out) { // fragments before it filled out
				q.flush(k)
				k = 0
			}
			q.out[k] = frames[i]
			k++
			continue
		}
		q.ctr.drops[DropTooBig].Add(1)
		q.tx.Free(frames[i : i+1])
	}
	q.flush(k)
	clear(q.frames[:got])
	return err
}

// SendFrame transmits one whole Ethernet frame (an ARP or NDP message of
// owned mode: an arp.FrameProber's Send, a Responder's reply) on some TX
// queue. It copies frame and does not keep it. The error is ErrNoBuffer
// (no free frame) or wraps dataplane.ErrFrameTooLong, the frame dropped
// and counted either way; a full TX ring is counted, not an error. Safe
// for concurrent use; it may be called with the neighbour table's lock
// held (see Bind), but not with a TX queue of this Bind held.
func (b *Bind) SendFrame(frame []byte) error {
	return sendFrame(func() *txQueue { return b.takeTX(netip.AddrPort{}) }, frame)
}

func sendFrame(take func() *txQueue, frame []byte) error {
	q := take()
	defer q.mu.Unlock()
	switch err := dataplane.SendCopy(q.tx, q.frames[:1], frame); err {
	case dataplane.ErrNoFreeFrame:
		q.ctr.drops.Add(DropNoBuffer, 1)
		return ErrNoBuffer
	case dataplane.ErrFrameTooLong:
		q.ctr.drops.Add(DropTooBig, 1)
		return fmt.Errorf("bind: send frame of %d bytes: %w", len(frame), err)
	case dataplane.ErrRingFull:
		q.ctr.drops.Add(DropTXFull, 1) // counted, as a full qdisc drops
	}
	return nil
}
