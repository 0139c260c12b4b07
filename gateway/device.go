package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// DefaultTickInterval is how often Start evaluates the timers: the workers
// publish their stamps at most this often (fastpath.PublishInterval), so
// ticking faster would see nothing new.
const DefaultTickInterval = fastpath.PublishInterval

// closeReapWait bounds how long Close waits for the dataplane's workers to
// pass a batch boundary so that the retired keypairs' keys are erased; a
// running worker does so within one batch, a parked one at once.
const closeReapWait = 100 * time.Millisecond

// Options configures a Device.
type Options struct {
	// Name names the UAPI socket /var/run/wireguard/<Name>.sock that Start
	// serves; empty means no socket (the Go API and IpcGet/IpcSet only).
	Name string
	// PrivateKey is the static private key; zero means none yet (set it
	// later through the UAPI or SetPrivateKey; no handshake is possible
	// before).
	PrivateKey noise.PrivateKey
	// ListenPort is reported over the UAPI as listen_port. The dataplane
	// owns the port; a UAPI set of another port is recorded, or, with
	// FixedListenPort, refused (EOPNOTSUPP: a dataplane that cannot move).
	ListenPort      uint16
	FixedListenPort bool
	// SetListenPort, if not nil, moves the dataplane to another listen
	// port when a UAPI set asks for one (wg set NAME listen-port N, or wg
	// setconf with another port), as wireguard-go rebinds: it returns the
	// port now in use (port 0 asks for any free one) or an error, and the
	// UAPI answers with its errno (EADDRINUSE...) or EIO. It is called with
	// the device's lock held and must not call back into the Device.
	SetListenPort func(port uint16) (uint16, error)
	// Dataplane is the fast path (a *fastpath.Engine, or a test double).
	// Required.
	Dataplane Dataplane
	// Now is the monotonic clock of every protocol timer, in ns. Default:
	// Dataplane.Now. It must be the clock the dataplane stamps with.
	Now func() int64
	// WallClock gives the wall time recorded as a peer's last handshake
	// (UAPI last_handshake_time_sec/nsec are Unix time). Default time.Now.
	WallClock func() time.Time
	// Logger receives protocol events at Debug and problems at Warn.
	// Default: discard.
	Logger *slog.Logger
	// Resolve returns the Ethernet address of the next hop toward a peer's
	// endpoint address (from the routing table), ok = false if unknown. It
	// may be nil: then an endpoint learned from a received handshake uses
	// the frame's source MAC (the last hop, right when the peer is on-link or
	// behind the same router), and a configured endpoint starts unresolved.
	Resolve func(dst netip.Addr) (mac [6]byte, ok bool)
	// WANMAC is our Ethernet address on the WAN port (Endpoint.SrcMAC).
	WANMAC [6]byte
	// WANInterface is the WAN port's interface name: an endpoint given
	// over the UAPI with an IPv6 zone is accepted only when the zone names
	// it (or its index, WANIndex).
	WANInterface string
	WANIndex     int
	// WANAddr4 and WANAddr6 are our outer addresses, the source of what we
	// send to a configured endpoint of each family.
	WANAddr4, WANAddr6 netip.Addr
	// TickInterval is how often Start runs Tick (default 50 ms).
	TickInterval time.Duration
	// Jitter returns the random delay added to each handshake retry, in
	// [0, protocol.RekeyTimeoutJitterMax). Default: math/rand/v2. Tests fix it.
	// It is called from several goroutines at once.
	Jitter func() time.Duration
	// HandshakeWorkers is the number of goroutines Start runs to process
	// handshake messages and send initiations (the Curve25519 work), like
	// the kernel's per-device workqueue and wireguard-go's per-CPU
	// handshake workers. 0 means runtime.GOMAXPROCS(0).
	HandshakeWorkers int
	// HandshakeBacklog is the capacity of the pool's queue of received
	// handshake messages; under load (cookie replies) from an eighth full.
	// 0 means DefaultHandshakeBacklog.
	HandshakeBacklog int
}

// PeerConfig is the configuration of one peer, as the Go API takes it.
type PeerConfig struct {
	PublicKey    noise.PublicKey
	PresharedKey noise.PresharedKey // zero: none
	// Endpoint is the peer's outer address and port; invalid: unknown until
	// the peer sends us a handshake.
	Endpoint netip.AddrPort
	// PersistentKeepalive is the persistent keepalive interval (whitepaper
	// §6.5), whole seconds up to 65535; 0 disables it.
	PersistentKeepalive time.Duration
	// AllowedIPs are the prefixes routed to the peer (and accepted from it).
	// A prefix already held by another peer moves to this one.
	AllowedIPs []netip.Prefix
}

// PeerStatus is a peer's configuration and state as Peers reports it.
type PeerStatus struct {
	PeerConfig
	// LastHandshake is the wall time of the last completed handshake, zero
	// if none.
	LastHandshake time.Time
	// TxBytes and RxBytes are the transport bytes the workers published.
	TxBytes, RxBytes uint64
}

// Device is the control plane of one WireGuard interface: the static
// identity, the peers, the handshake pool and the timers, over a Dataplane.
//
// All methods are safe for concurrent use. Locks (ARCHITECTURE.md "Control
// plane locks"), always taken in this order:
//
//   - setMu serialises UAPI set requests.
//   - mu (read-write) guards the configuration: the identity, the peer set
//     and its maps, allowed IPs, listen port. Handshake workers take it for
//     reading only to look a peer up, never across Curve25519 work.
//   - idMu is held for reading by whoever uses the identity's private key
//     outside mu (a handshake worker for one message, Tick); replacing the
//     private key takes it for writing, after mu is released, to zero the
//     old identity.
//   - peer.mu guards one peer's session and timer state; the Curve25519
//     work of that peer's handshake runs under it and under no lock shared
//     with other peers.
//   - pendMu (pending), touchMu (touched), tickMu (the timer heap; taken
//     by Tick before any peer.mu), the pool's queue lock and the cookie
//     budget's lock are leaves.
//
// The workers reach the peers only through the atomics of fastpath.Peer.
type Device struct {
	opts Options
	dp   Dataplane
	now  func() int64
	wall func() time.Time
	log  *slog.Logger

	setMu sync.Mutex // serialises UAPI set requests (taken before mu)

	mu         sync.RWMutex
	idMu       sync.RWMutex
	private    noise.PrivateKey
	id         *noise.StaticIdentity   // nil without a private key
	retiredIDs []*noise.StaticIdentity // replaced, to zero (zeroRetired)
	hasRetired atomic.Bool
	listenPort uint16
	fwmark     uint32
	peers      []*peer                   // configuration order
	byKey      map[noise.PublicKey]*peer // by static public key
	byFP       map[*fastpath.Peer]*peer  // by the fast path's peer
	allowed    map[netip.Prefix]*peer    // masked prefix → owner
	// dirtyPeers and dirtyPrefixes are what changed since the last
	// publish: peers created or forgotten, prefixes whose owner may have
	// changed. publishLocked hands the dataplane only these.
	dirtyPeers    map[*peer]struct{}
	dirtyPrefixes map[netip.Prefix]struct{}
	// precompute are the handshakes made since the last publish, whose
	// static-static DH publishLocked has computed in the background.
	precompute []*noise.Handshake
	// precomputing counts the background precompute runs still going.
	precomputing atomic.Int64
	limiter      *noise.SourceLimiter // handshakes per proven source under load
	replies      cookieBudget         // cookie replies per second, all sources (own lock)
	underLoad    atomic.Int64         // last time the dataplane was under load
	wasLoaded    atomic.Bool          // underLoad is valid
	stats        counters

	pendMu  sync.Mutex
	pending map[uint32]*peer // our receiver indexes of initiations in flight

	pool handshakePool // the handshake workers' queue of initiations (pool.go)

	// touched are the peers whose timer state the handshake workers or the
	// UAPI changed since the last tick, each once (peer.touched); Tick
	// evaluates them.
	touchMu sync.Mutex
	touched []*peer

	tickMu    sync.Mutex // serialises Tick; guards the fields below
	timers    timerHeap
	tickGen   uint64
	tickEvals uint64           // peer evaluations, for TickStats
	tickBusy  time.Duration    // wall time in Tick, for TickStats
	stamped   []*fastpath.Peer // scratch for Dataplane's StampedPeers
	due       []*peer          // scratch: the peers one tick evaluates

	startOnce sync.Once
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
	uapi      net.Listener
	conns     map[net.Conn]struct{} // UAPI connections being served; guarded by mu
}

// peer is the control plane's state of one peer. fp and pub are immutable;
// psk and allowed are guarded by Device.mu; hs, keepalive and pkaBase are
// written under both Device.mu and mu and read under either; lastHSWall is
// atomic; the heap fields belong to Tick (Device.tickMu); every other field
// is guarded by mu.
type peer struct {
	fp        *fastpath.Peer
	pub       noise.PublicKey
	psk       noise.PresharedKey
	allowed   []netip.Prefix   // masked, insertion order
	hs        *noise.Handshake // nil while the device has no private key
	keepalive uint16           // persistent keepalive interval, s
	published bool             // fp is in the dataplane's peer set

	mu      sync.Mutex
	removed bool // left the configuration: nothing more is done for it
	// initQueued: an initiation waits in the handshake pool's queue.
	initQueued bool

	// Tick's: the position in the timer heap and the deadline it is
	// filed under (timerheap.go), the tick that last evaluated it.
	heapIdx int
	due     int64
	evalGen uint64
	touched atomic.Bool // in Device.touched

	// owned are the keypairs this peer published to the index table that
	// have not been freed yet; sweepLocked frees those no slot holds any
	// more.
	owned []ownedKeypair
	// pendingIndex is the receiver index of our handshake message in flight
	// (initiation), registered in Device.pending.
	pendingIndex uint32
	hasPending   bool

	lastInitSent int64 // when we last sent an initiation (RekeyTimeout rate limit)
	initSent     bool
	retransmitAt int64 // retry deadline, 0 = none (whitepaper §6.4)
	attempts     int
	zeroAt       int64        // key material zeroing deadline, 0 = none (§6.3)
	sentLastMin  bool         // the initiator's "last minute" rekey on receive
	lastHSWall   atomic.Int64 // wall time of the last completed handshake, Unix ns; 0 none

	ownSent       int64 // last authenticated packet the control plane sent
	ownRecv       int64 // last authenticated handshake message received
	kaArmedAt     int64 // first data received since we last sent (§6.5)
	nhArmedAt     int64 // first data sent since we last received
	nhJitter      int64
	nhRearm       int64 // new-handshake timer re-arms only for data after this
	pkaBase       int64 // when persistent keepalive was turned on
	handshakeDone bool  // a session was ever established (for logs)
}

// New makes a device over o.Dataplane. It does not start anything: Start
// runs the handshake loop, the ticker and the UAPI socket.
func New(o Options) (*Device, error) {
	if o.Dataplane == nil {
		return nil, errors.New("gateway: a dataplane is required")
	}
	d := &Device{
		opts:       o,
		dp:         o.Dataplane,
		now:        o.Now,
		wall:       o.WallClock,
		log:        o.Logger,
		listenPort: o.ListenPort,
		byKey:      make(map[noise.PublicKey]*peer),
		byFP:       make(map[*fastpath.Peer]*peer),
		pending:    make(map[uint32]*peer),
		allowed:    make(map[netip.Prefix]*peer),
		done:       make(chan struct{}),

		dirtyPeers:    make(map[*peer]struct{}),
		dirtyPrefixes: make(map[netip.Prefix]struct{}),
	}
	if d.now == nil {
		d.now = o.Dataplane.Now
	}
	if d.wall == nil {
		d.wall = time.Now
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.opts.TickInterval <= 0 {
		d.opts.TickInterval = DefaultTickInterval
	}
	if d.opts.Jitter == nil {
		d.opts.Jitter = randomJitter
	}
	if d.opts.HandshakeWorkers <= 0 {
		d.opts.HandshakeWorkers = runtime.GOMAXPROCS(0)
	}
	if d.opts.HandshakeBacklog <= 0 {
		d.opts.HandshakeBacklog = DefaultHandshakeBacklog
	}
	d.pool.init(d.opts.HandshakeWorkers, d.opts.HandshakeBacklog)
	d.limiter = noise.NewSourceLimiter(d.clock)
	d.mu.Lock()
	d.setPrivateKeyLocked(o.PrivateKey)
	d.mu.Unlock()
	return d, nil
}

// clock adapts the injected ns clock to the time.Time clock of package noise
// (flood limit, cookie lifetimes).
func (d *Device) clock() time.Time { return time.Unix(0, d.now()) }

// PublicKey returns the device's static public key (zero without a private
// key).
func (d *Device) PublicKey() noise.PublicKey {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.id == nil {
		return noise.PublicKey{}
	}
	return d.id.PublicKey()
}

// SetPrivateKey replaces the static private key (zero: none). As in
// wireguard-go, every session ends (the peers' keypairs are dropped and
// zeroed; new handshakes follow on demand) and a peer whose public key is the
// new key's own is removed.
func (d *Device) SetPrivateKey(k noise.PrivateKey) {
	d.mu.Lock()
	d.setPrivateKeyLocked(k)
	d.publishLocked()
	d.mu.Unlock()
	d.zeroRetired()
}

// setPrivateKeyLocked replaces the identity. The old one may still be in
// use by a handshake worker or Tick (they hold idMu for reading): it is
// zeroed by zeroRetired, which the caller runs once it has released mu.
func (d *Device) setPrivateKeyLocked(k noise.PrivateKey) {
	if d.id != nil && d.private.Equal(&k) {
		return
	}
	if d.id != nil {
		d.retiredIDs = append(d.retiredIDs, d.id)
		d.hasRetired.Store(true)
		d.id = nil
	}
	d.private.Zero()
	d.private = k
	if !k.IsZero() {
		d.id = noise.NewStaticIdentity(k, d.clock)
	}
	for _, p := range append([]*peer(nil), d.peers...) {
		if d.id != nil {
			self := d.id.PublicKey()
			if self.Equal(&p.pub) {
				d.removePeerLocked(p)
				continue
			}
		}
		var hs *noise.Handshake
		if d.id != nil {
			hs = noise.NewHandshake(d.id, p.pub, p.psk)
			d.precompute = append(d.precompute, hs)
		}
		p.mu.Lock()
		d.resetSessionLocked(p)
		if p.hs != nil {
			p.hs.Zero()
		}
		p.hs = hs
		p.mu.Unlock()
		d.touch(p)
	}
}

// zeroRetired zeroes the identities setPrivateKeyLocked replaced, once no
// handshake worker or tick uses them any more. Called without mu held (a
// worker holding idMu may be waiting for mu to look a peer up).
func (d *Device) zeroRetired() {
	if !d.hasRetired.Load() {
		return
	}
	d.mu.Lock()
	d.hasRetired.Store(false)
	ids := d.retiredIDs
	d.retiredIDs = nil
	d.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	d.idMu.Lock()
	for _, id := range ids {
		id.Zero()
	}
	d.idMu.Unlock()
}

// AddPeer adds a peer, or replaces the configuration of the peer with the
// same public key (its sessions are kept, its allowed IPs replaced). A peer
// whose key is our own is ignored, as wireguard-go does.
func (d *Device) AddPeer(c PeerConfig) error { return d.AddPeers([]PeerConfig{c}) }

// AddPeers is AddPeer for many peers, in order, handing the dataplane the
// new peer set once: adding n peers one by one rebuilds the dataplane's
// tables n times, adding them together once. It checks every configuration
// before it applies any; on an error nothing changed.
func (d *Device) AddPeers(cs []PeerConfig) error {
	for _, c := range cs {
		if c.PersistentKeepalive < 0 || c.PersistentKeepalive > 65535*time.Second {
			return fmt.Errorf("gateway: peer %s: persistent keepalive %v out of range", c.PublicKey, c.PersistentKeepalive)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range cs {
		p, _ := d.lookupOrCreateLocked(c.PublicKey)
		if p == nil {
			continue
		}
		d.setPSKLocked(p, c.PresharedKey)
		if c.Endpoint.IsValid() {
			d.setEndpointConfigLocked(p, c.Endpoint)
		}
		d.setKeepaliveLocked(p, uint16(c.PersistentKeepalive/time.Second))
		d.clearAllowedLocked(p)
		for _, pfx := range c.AllowedIPs {
			d.addAllowedLocked(p, pfx)
		}
	}
	return d.publishLocked()
}

// RemovePeer removes the peer with public key k, zeroing its sessions and
// handshake state; it reports whether there was one.
func (d *Device) RemovePeer(k noise.PublicKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.byKey[k]
	if p == nil {
		return false
	}
	d.removePeerLocked(p)
	d.publishLocked()
	return true
}

// Peers returns every peer's configuration and state, in configuration
// order.
func (d *Device) Peers() []PeerStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]PeerStatus, 0, len(d.peers))
	for _, p := range d.peers {
		s := PeerStatus{
			PeerConfig: PeerConfig{
				PublicKey:           p.pub,
				PresharedKey:        p.psk,
				PersistentKeepalive: time.Duration(p.keepalive) * time.Second,
				AllowedIPs:          append([]netip.Prefix(nil), p.allowed...),
			},
			LastHandshake: p.lastHandshake(),
			TxBytes:       p.fp.TxBytes.Load(),
			RxBytes:       p.fp.RxBytes.Load(),
		}
		if ep := p.fp.Endpoint.Load(); ep != nil {
			s.Endpoint = ep.Dst
		}
		out = append(out, s)
	}
	return out
}

// FastPeer returns the fast path's Peer for public key k (nil if none), for
// embedders and tests that drive a data path.
func (d *Device) FastPeer(k noise.PublicKey) *fastpath.Peer {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if p := d.byKey[k]; p != nil {
		return p.fp
	}
	return nil
}

// lookupOrCreateLocked returns the peer for k, creating it; created reports
// a new peer. It returns nil for our own public key.
func (d *Device) lookupOrCreateLocked(k noise.PublicKey) (p *peer, created bool) {
	// Without a private key our public key is the zero key, and a peer
	// with the zero key is ignored too (as wireguard-go does).
	var self noise.PublicKey
	if d.id != nil {
		self = d.id.PublicKey()
	}
	if self.Equal(&k) {
		return nil, false
	}
	if p = d.byKey[k]; p != nil {
		return p, false
	}
	p = &peer{fp: &fastpath.Peer{PublicKey: k}, pub: k, heapIdx: -1}
	if d.id != nil {
		p.hs = noise.NewHandshake(d.id, k, p.psk)
		d.precompute = append(d.precompute, p.hs)
	}
	d.peers = append(d.peers, p)
	d.byKey[k] = p
	d.byFP[p.fp] = p
	d.dirtyPeers[p] = struct{}{}
	return p, true
}

func (d *Device) setPSKLocked(p *peer, psk noise.PresharedKey) {
	p.psk.Zero()
	p.psk = psk
	if p.hs != nil {
		p.hs.SetPresharedKey(psk)
	}
}

func (d *Device) setKeepaliveLocked(p *peer, secs uint16) (turnedOn bool) {
	p.mu.Lock()
	turnedOn = p.keepalive == 0 && secs != 0
	changed := p.keepalive != secs
	p.keepalive = secs
	if turnedOn {
		p.pkaBase = d.now()
	}
	p.mu.Unlock()
	if changed {
		d.touch(p)
	}
	return turnedOn
}

// lastHandshake is the wall time of p's last completed handshake (zero:
// none).
func (p *peer) lastHandshake() time.Time {
	if ns := p.lastHSWall.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// setEndpointConfigLocked sets a configured endpoint: our source address
// of its family, its next hop's MAC if the resolver knows it.
func (d *Device) setEndpointConfigLocked(p *peer, ap netip.AddrPort) {
	// Kept as given (an IPv4-mapped IPv6 address stays one), so that the
	// UAPI prints back what was set, as wireguard-go does.
	ep := &fastpath.Endpoint{Dst: ap, SrcMAC: d.opts.WANMAC}
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		ep.Src = d.opts.WANAddr4
	} else {
		ep.Src = d.opts.WANAddr6
	}
	if d.opts.Resolve != nil {
		ep.DstMAC, _ = d.opts.Resolve(ap.Addr())
	}
	p.fp.Endpoint.Store(ep)
}

// removePeerLocked forgets p: its keypairs, indexes, handshake and allowed
// IPs. The caller publishes.
func (d *Device) removePeerLocked(p *peer) {
	d.forgetPeerLocked(p)
	for i, q := range d.peers {
		if q == p {
			d.peers = append(d.peers[:i], d.peers[i+1:]...)
			break
		}
	}
}

// removeAllPeersLocked removes every peer, in time linear in their number
// (removePeerLocked one by one is quadratic). The caller publishes.
func (d *Device) removeAllPeersLocked() {
	for _, p := range d.peers {
		d.forgetPeerLocked(p)
	}
	clear(d.peers)
	d.peers = d.peers[:0]
}

// forgetPeerLocked is removePeerLocked but for d.peers. The workers drop
// the packets they hold for p (fastpath.Peer.Removed).
func (d *Device) forgetPeerLocked(p *peer) {
	p.fp.Removed.Store(true)
	p.mu.Lock()
	p.removed = true
	d.resetSessionLocked(p)
	if p.hs != nil {
		p.hs.Zero()
		p.hs = nil
	}
	p.mu.Unlock()
	d.touch(p) // Tick takes it out of the timer heap
	p.psk.Zero()
	d.clearAllowedLocked(p)
	delete(d.byKey, p.pub)
	delete(d.byFP, p.fp)
	d.dirtyPeers[p] = struct{}{}
}

// resetSessionLocked drops every keypair and the handshake in flight of p
// and zeroes them (whitepaper §6.3's "zero all key material"); the workers
// drop the packets they hold for p (FlushHeld, counted handshake_gave_up),
// as no handshake is under way for them any more. An initiation waiting in
// the pool is cancelled. p.mu held.
func (d *Device) resetSessionLocked(p *peer) {
	p.initQueued = false
	p.fp.FlushHeld.Store(true)
	cleared := p.fp.ClearKeypairs()
	d.sweepLocked(p, cleared[:]...)
	d.dropPendingLocked(p)
	if p.hs != nil {
		p.hs.Clear()
	}
	p.retransmitAt, p.attempts, p.zeroAt = 0, 0, 0
	p.kaArmedAt, p.nhArmedAt = 0, 0
	p.fp.HandshakeNeeded.Store(false)
}

// dropPendingLocked releases the receiver index of the handshake in flight.
// p.mu held.
func (d *Device) dropPendingLocked(p *peer) {
	if !p.hasPending {
		return
	}
	d.pendMu.Lock()
	if d.pending[p.pendingIndex] == p {
		delete(d.pending, p.pendingIndex)
	}
	d.pendMu.Unlock()
	d.dp.Indexes().Free(p.pendingIndex)
	p.hasPending = false
	p.pendingIndex = 0
}

// ownedKeypair is a published keypair and whether the last sweep found it
// in none of its peer's slots.
type ownedKeypair struct {
	kp      *fastpath.Keypair
	missing bool
}

// sweepLocked frees (index table) and retires every keypair p published that
// none of its three slots holds any more: Dataplane.Retire marks it dead at
// once and erases its keys after the grace period in which a worker may still
// be in a batch that loaded it (Tick reaps). A keypair the control plane took
// out itself (dropped: Rotate's result, a rejected or cleared one) goes at
// once. One that left for another reason (a worker's promotion pushed it
// out of Previous) goes only when a second sweep, a tick later, still finds
// it in no slot: a worker's promotion moves a keypair from Next to Current
// in two steps, and between them it is briefly in neither. p.mu held.
func (d *Device) sweepLocked(p *peer, dropped ...*fastpath.Keypair) {
	cur, prev, next := p.fp.Current.Load(), p.fp.Previous.Load(), p.fp.Next.Load()
	kept := p.owned[:0]
	for _, o := range p.owned {
		kp := o.kp
		if kp == cur || kp == prev || kp == next {
			kept = append(kept, ownedKeypair{kp: kp})
			continue
		}
		known := false
		for _, k := range dropped {
			if k == kp {
				known = true
			}
		}
		if !known && !o.missing {
			kept = append(kept, ownedKeypair{kp: kp, missing: true})
			continue
		}
		d.dp.Indexes().Free(kp.LocalIndex)
		if !kp.IsInitiator && !kp.Confirmed() {
			d.stats.unconfirmed.Add(1)
		}
		d.dp.Retire(kp)
	}
	clear(p.owned[len(kept):])
	p.owned = kept
}

func (d *Device) clearAllowedLocked(p *peer) {
	for _, pfx := range p.allowed {
		if d.allowed[pfx] == p {
			delete(d.allowed, pfx)
			d.dirtyPrefixes[pfx] = struct{}{}
		}
	}
	p.allowed = p.allowed[:0]
}

// addAllowedLocked gives pfx to p, at the end of p's list even when p held
// it already (wireguard-go's allowedips moves a re-inserted prefix to the
// back of its peer's list, so that wg show lists it there).
func (d *Device) addAllowedLocked(p *peer, pfx netip.Prefix) {
	pfx = pfx.Masked()
	if old := d.allowed[pfx]; old != nil {
		old.removeAllowed(pfx)
	}
	d.allowed[pfx] = p
	p.allowed = append(p.allowed, pfx)
	d.dirtyPrefixes[pfx] = struct{}{}
}

func (d *Device) removeAllowedLocked(p *peer, pfx netip.Prefix) {
	pfx = pfx.Masked()
	if d.allowed[pfx] != p {
		return
	}
	delete(d.allowed, pfx)
	p.removeAllowed(pfx)
	d.dirtyPrefixes[pfx] = struct{}{}
}

func (p *peer) removeAllowed(pfx netip.Prefix) {
	for i, q := range p.allowed {
		if q == pfx {
			p.allowed = append(p.allowed[:i], p.allowed[i+1:]...)
			return
		}
	}
}

// publishLocked hands the dataplane what changed since the last publish
// (peers created or forgotten, prefixes whose owner changed) as one
// fastpath.PeerChange, and returns (and logs) its error: what it could not
// take. Its cost follows the size of the change, not the configuration's.
func (d *Device) publishLocked() error {
	c := fastpath.PeerChange{Routes: make([]fastpath.Route, 0, len(d.dirtyPrefixes))}
	for p := range d.dirtyPeers {
		live := d.byFP[p.fp] == p
		switch {
		case live && !p.published:
			c.Add = append(c.Add, p.fp)
			p.published = true
		case !live && p.published:
			c.Remove = append(c.Remove, p.fp)
			p.published = false
		}
	}
	for pfx := range d.dirtyPrefixes {
		var fp *fastpath.Peer
		if o := d.allowed[pfx]; o != nil {
			fp = o.fp
		}
		c.Routes = append(c.Routes, fastpath.Route{Prefix: pfx, Peer: fp})
	}
	// clear costs the maps' capacity: after a large change, new ones.
	if len(d.dirtyPeers)+len(d.dirtyPrefixes) > 1024 {
		d.dirtyPeers, d.dirtyPrefixes = make(map[*peer]struct{}), make(map[netip.Prefix]struct{})
	} else {
		clear(d.dirtyPeers)
		clear(d.dirtyPrefixes)
	}
	if len(d.precompute) > 0 {
		d.precomputing.Add(1)
		go func(hs []*noise.Handshake) {
			defer d.precomputing.Add(-1)
			precompute(hs, d.done)
		}(d.precompute)
		d.precompute = nil
	}
	if c.Empty() {
		return nil
	}
	if err := d.dp.UpdatePeers(c); err != nil {
		d.log.Error("the dataplane did not take the whole configuration", "err", err)
		return err
	}
	return nil
}

// Settle waits until the background work of earlier configuration
// changes (the static-static DH of new peers, see precompute) has finished
// or the device is closing, as in a gateway that has run for a while; for
// tests and benchmarks that count Curve25519 operations or CPU time. Safe
// for concurrent use; changes made while it waits may extend the wait.
func (d *Device) Settle() {
	for d.precomputing.Load() > 0 {
		select {
		case <-d.done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// precompute computes the static-static DH of hs (noise.Handshake.Precompute)
// on half the CPUs (at least one), until done closes: after a large
// configuration, so that the first handshake of each peer does not pay for
// it. A handshake that came first, or was zeroed since, costs nothing.
func precompute(hs []*noise.Handshake, done <-chan struct{}) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)/2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(hs) {
					return
				}
				if i%256 == 0 {
					select {
					case <-done:
						return
					default:
					}
				}
				hs[i].Precompute()
			}
		}()
	}
	wg.Wait()
}

// Start runs the handshake pool (Options.HandshakeWorkers goroutines
// receiving Dataplane.Handshakes and sending initiations; pool.go) and the
// timers (Tick every TickInterval on the real clock, in a goroutine of its
// own) and, if Options.Name is set, serves the UAPI socket. It returns an
// error only if the socket cannot be made.
func (d *Device) Start() error {
	var err error
	d.startOnce.Do(func() {
		if d.opts.Name != "" {
			if err = d.listenUAPI(d.opts.Name); err != nil {
				return
			}
		}
		d.pool.async.Store(true)
		d.wg.Add(1)
		go d.dispatch()
		for range d.opts.HandshakeWorkers {
			d.wg.Add(1)
			go d.handshakeWorker()
		}
		d.wg.Add(1)
		go d.tickLoop()
	})
	return err
}

// minTickGap is the shortest wait between two ticks of tickLoop: timers
// due closer together than this fire together.
const minTickGap = 5 * time.Millisecond

// tickLoop runs Tick until Close: every TickInterval (when the workers
// publish their stamps), and sooner when the timer heap's earliest
// deadline comes first (not sooner than minTickGap after the last tick),
// so that a timer fires within a few ms of its deadline rather than up to a
// tick late.
func (d *Device) tickLoop() {
	defer d.wg.Done()
	t := time.NewTimer(d.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		now := d.now()
		d.Tick(now)
		wait := d.opts.TickInterval
		if due, ok := d.nextDeadline(); ok {
			wait = min(wait, max(time.Duration(due-d.now()), minTickGap))
		}
		t.Reset(wait)
	}
}

// Close stops the loops, removes the UAPI socket, and zeroes every key the
// device holds. The dataplane is not closed: the keypairs' keys are erased
// as soon as its workers have passed a batch boundary (Close waits up to
// closeReapWait for that; what is left then goes at the dataplane's next
// Reap or its Close).
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.done)
		d.mu.Lock()
		l := d.uapi
		for c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()
		if l != nil {
			l.Close()
		}
		d.wg.Wait()
		d.pool.async.Store(false)
		d.mu.Lock()
		d.removeAllPeersLocked()
		if d.id != nil {
			d.retiredIDs = append(d.retiredIDs, d.id)
			d.hasRetired.Store(true)
			d.id = nil
		}
		d.private.Zero()
		d.publishLocked()
		d.mu.Unlock()
		d.zeroRetired()
		d.pool.clear()
		d.touchMu.Lock()
		clear(d.touched)
		d.touched = nil
		d.touchMu.Unlock()
		for end := time.Now().Add(closeReapWait); d.dp.Reap() > 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	})
	return nil
}

// SetWANAddrs changes our outer addresses while running (the WAN
// interface's address was replaced): configured endpoints set later take
// the new ones, and every peer's endpoint whose source is an old address of
// its family moves to the new one (invalid: no usable address of that
// family; the workers then count what they cannot send). The dataplane's
// own matching is changed separately (fastpath.Engine.SetWAN).
func (d *Device) SetWANAddrs(addr4, addr6 netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old4, old6 := d.opts.WANAddr4, d.opts.WANAddr6
	d.opts.WANAddr4, d.opts.WANAddr6 = addr4, addr6
	for _, p := range d.peers {
		ep := p.fp.Endpoint.Load()
		if ep == nil {
			continue
		}
		n := *ep
		switch {
		case ep.Dst.Addr().Unmap().Is4() && ep.Src != addr4 && (ep.Src == old4 || !ep.Src.IsValid()):
			n.Src = addr4
		case !ep.Dst.Addr().Unmap().Is4() && ep.Src != addr6 && (ep.Src == old6 || !ep.Src.IsValid()):
			n.Src = addr6
		default:
			continue
		}
		p.fp.Endpoint.CompareAndSwap(ep, &n)
	}
	d.dp.Kick()
}
