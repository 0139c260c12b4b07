package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/acceptloop"
	"github.com/wgpio/wgpio/internal/uapiserve"
	"github.com/wgpio/wgpio/noise"
)

// closeReapWait bounds how long Close waits for the dataplane's workers to
// pass a batch boundary so that the retired keypairs' keys are erased; a
// running worker does so within one batch, a parked one at once.
const closeReapWait = 100 * time.Millisecond

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

	setMu      sync.Mutex       // serialises UAPI set requests (taken before mu)
	replyBufs  replyBufs        // IpcGet's buffers, kept while gets come
	getReplies uapiserve.Budget // bytes of the UAPI socket's get replies held at once

	mu         sync.RWMutex
	idMu       sync.RWMutex
	private    noise.PrivateKey
	id         *noise.StaticIdentity   // nil without a private key
	retiredIDs []*noise.StaticIdentity // replaced, to zero (zeroRetired)
	// noiseStats is what every identity the device had counted
	// (Stats.Noise): one for all, so that the counts go on across a
	// change of the private key.
	noiseStats noise.Stats
	hasRetired atomic.Bool
	listenPort uint16
	fwmark     uint32
	peers      peerList                  // configuration order
	byKey      map[noise.PublicKey]*peer // by static public key
	byFP       map[*fastpath.Peer]*peer  // by the fast path's peer
	allowed    map[netip.Prefix]*peer    // masked prefix → owner
	// dirtyPeers and dirtyPrefixes are what changed since the last
	// publish: peers created or forgotten, prefixes whose owner may have
	// changed. publishLocked hands the dataplane only these.
	// dirtyRoutes are the prefixes' routes (each one's owner now), in
	// the order first touched; dirtyPrefixes maps each to its index.
	dirtyPeers    map[*peer]struct{}
	dirtyPrefixes map[netip.Prefix]int
	dirtyRoutes   []fastpath.Route
	// created are the peers created since the last publish (or
	// joinCreatedLocked), in order: a set of the UAPI socket hands them
	// to the dataplane before it releases mu between its batches.
	created []*peer
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
	// sweptChanges is Options.ResolveChanges' count at the last sweep
	// of the next hops, sweepAt the earliest time of the next, sweep its
	// scratch list of the peers (sweepNextHops).
	sweptChanges uint64
	sweepAt      int64
	sweep        []*peer

	startOnce sync.Once
	startErr  error       // the first Start's error, returned by every later one
	started   atomic.Bool // Start ran: a keepalive turned on is sent at once
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
	bg        sync.WaitGroup // background precomputation (precompute), rerouteQueued
	uapi      net.Listener
	uapiIdle  time.Duration // uapiIdleTimeout; tests shorten it before serving
	// uapiConns serves d.uapi's connections, uapiMaxConns at once
	// (serveUAPI; uapiserve.NewServer, as the compat modes' sockets).
	uapiConns *acceptloop.Server

	// wanDefs are the default sources (routesrc.go), read without mu.
	wanDefs atomic.Pointer[wanDefaults]
	// srcLater are the peers rerouteQueued asks the route of, srcBusy
	// whether it runs; guarded by srcMu, a leaf.
	srcMu    sync.Mutex
	srcLater []*peer
	srcBusy  bool

	badMAC1Logged     atomic.Int64 // when warnBadMAC1 last logged (Options.Now's clock), 0: never
	uapiWarns         uapiWarnLimit
	unknownPeerLogged atomic.Int64 // when warnUnknownPeer last logged (Options.Now's clock), 0: never
	pskLogged         atomic.Int64 // when warnPSK last logged (Options.Now's clock), 0: never
}

// ValidName reports whether name can name an interface (Linux
// dev_valid_name: 1 to 15 bytes, not "." or "..", no '/', ':' or white
// space; nor '%', the kernel's name template), as wg(8) expects of a
// device's name and a UAPI socket's file needs (Options.Name):
// uapiserve.ValidName.
func ValidName(name string) bool { return uapiserve.ValidName(name) }

// New makes a device over o.Dataplane. It does not start anything: Start
// runs the handshake loop, the ticker and the UAPI socket.
func New(o Options) (*Device, error) {
	if o.Dataplane == nil {
		return nil, errors.New("gateway: a dataplane is required")
	}
	// The socket's file is /var/run/wireguard/<Name>.sock: a name with a
	// '/' put it elsewhere ("../../tmp/x" made /tmp/x.sock).
	if o.Name != "" && !ValidName(o.Name) {
		return nil, fmt.Errorf("gateway: name %q cannot name a UAPI socket: an interface name, 1 to 15 bytes, no '/', ':', '%%' or white space", o.Name)
	}
	// 0 means the default; a negative count or interval is a caller's
	// mistake, refused rather than taken as the default.
	switch {
	case o.HandshakeWorkers < 0:
		return nil, fmt.Errorf("gateway: HandshakeWorkers %d: a count, 0 for one per CPU", o.HandshakeWorkers)
	case o.HandshakeBacklog < 0:
		return nil, fmt.Errorf("gateway: HandshakeBacklog %d: a capacity, 0 for %d", o.HandshakeBacklog, DefaultHandshakeBacklog)
	case o.TickInterval < 0:
		return nil, fmt.Errorf("gateway: TickInterval %v: a duration, 0 for %v", o.TickInterval, DefaultTickInterval)
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
		uapiIdle:   uapiIdleTimeout,
		uapiConns:  uapiserve.NewServer(o.Logger),

		dirtyPeers:    make(map[*peer]struct{}),
		dirtyPrefixes: make(map[netip.Prefix]int),
	}
	if e, ok := o.Dataplane.(*fastpath.Engine); ok {
		if _, taken := engineDevices.LoadOrStore(e, d); taken {
			return nil, errors.New("gateway: the engine already has a Device (one control plane an engine: two would both take its handshakes and set its peers); Close that one first")
		}
		if d.opts.WANMAC == ([6]byte{}) {
			_, wan := e.Ports()
			copy(d.opts.WANMAC[:], wan.MAC())
		}
		if d.listenPort == 0 {
			d.listenPort, _, _ = e.WAN()
		}
	}
	d.wanDefs.Store(&wanDefaults{o.WANAddr4, o.WANAddr6})
	if d.now == nil {
		d.now = o.Dataplane.Now
	}
	if d.wall == nil {
		d.wall = time.Now
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.opts.TickInterval == 0 {
		d.opts.TickInterval = DefaultTickInterval
	}
	if d.opts.Jitter == nil {
		d.opts.Jitter = randomJitter
	}
	if d.opts.HandshakeWorkers == 0 {
		d.opts.HandshakeWorkers = runtime.GOMAXPROCS(0)
	}
	if d.opts.HandshakeBacklog == 0 {
		d.opts.HandshakeBacklog = DefaultHandshakeBacklog
	}
	d.pool.init(d.opts.HandshakeWorkers, d.opts.HandshakeBacklog)
	d.limiter = noise.NewSourceLimiter(d.clock)
	d.mu.Lock()
	d.setPrivateKeyLocked(o.PrivateKey)
	d.mu.Unlock()
	return d, nil
}

// engineDevices maps each *fastpath.Engine a Device runs on to that
// Device, from New to the end of Close: an engine serves one control
// plane (its handshake queue is drained by one, its peer set is one
// configuration's), so New refuses a second.
var engineDevices sync.Map

// clock adapts the injected ns clock to the time.Time clock of package noise
// (flood limit, cookie lifetimes).
func (d *Device) clock() time.Time { return time.Unix(0, d.now()) }

// errDeviceClosed is the error of the configuration calls after Close.
var errDeviceClosed = fmt.Errorf("gateway: device closed: %w", net.ErrClosed)

// closed reports whether Close has begun. The configuration calls check it
// under mu: Close closes done before it takes mu to remove every peer, so
// a call that took mu first has its changes undone by Close, and one that
// takes it later changes nothing.
func (d *Device) closed() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// AddPeer adds a peer, or replaces the configuration of the peer with the
// same public key (its sessions are kept, its allowed IPs replaced). A peer
// whose key is our own is ignored, as wireguard-go does.
func (d *Device) AddPeer(c PeerConfig) error { return d.AddPeers([]PeerConfig{c}) }

// AddPeers is AddPeer for many peers, in order, handing the dataplane the
// new peer set once: adding n peers one by one rebuilds the dataplane's
// tables n times, adding them together once. It checks every configuration
// before it applies any; on an error nothing changed. After Close it adds
// nothing and returns an error wrapping net.ErrClosed. It returns once the
// dataplane has done the work of the change it does outside the device's
// lock (dataplaneWaiter), as IpcSet does.
func (d *Device) AddPeers(cs []PeerConfig) (err error) {
	for _, c := range cs {
		if err := c.check(); err != nil {
			return err
		}
	}
	// Once d.mu is released: the dataplane's work of the change done
	// out of it (dataplaneWaiter).
	defer d.waitApplied()
	// Once d.mu is released too: the part of the change the dataplane
	// left to do (publishLaterLocked).
	var later func() error
	defer func() {
		if later != nil {
			if lerr := later(); err == nil {
				err = lerr
			}
		}
	}()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed() {
		return errDeviceClosed
	}
	var kick []*peer
	for _, c := range cs {
		p, _ := d.lookupOrCreateLocked(c.PublicKey)
		if p == nil {
			continue
		}
		d.setPSKLocked(p, c.PresharedKey)
		if c.Endpoint.IsValid() {
			d.setEndpointConfigLocked(p, c.Endpoint)
		}
		if d.setKeepaliveLocked(p, uint16(c.PersistentKeepalive/time.Second)) {
			kick = append(kick, p)
		}
		d.clearAllowedLocked(p)
		for _, pfx := range c.AllowedIPs {
			d.addAllowedLocked(p, pfx)
		}
	}
	later, err = d.publishLaterLocked()
	// A persistent keepalive turned on for a running device is sent at
	// once, as the UAPI does (postPeerLocked); before Start, Start sends
	// them (keepalivesAtStart).
	if d.started.Load() {
		now := d.now()
		for _, p := range kick {
			d.sendKeepaliveLocked(p, now)
		}
	}
	return err
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
// order. It copies every peer's allowed IPs into new slices (at 100,000
// peers of two prefixes each: 26 MB in 200,000 objects, 50 ms under the
// device's read lock, which the UAPI's sets and the timers then wait
// for): callers that need only the state read PeerStates.
func (d *Device) Peers() []PeerStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]PeerStatus, 0, d.peers.Len())
	for p := range d.peers.All {
		s := PeerStatus{
			PeerConfig: PeerConfig{
				PublicKey:           p.pub,
				PresharedKey:        p.psk,
				PersistentKeepalive: time.Duration(p.keepalive) * time.Second,
				AllowedIPs:          p.allowed.Append(nil),
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

// PeerStates appends every peer's state to dst, in configuration order,
// and returns the extended slice: Peers without the configuration (no
// allowed IPs, no preshared key), one PeerState a peer and no other
// allocation, so that a caller reusing dst (a metrics scrape, `wgpio
// stats`) allocates nothing in the steady state. Safe for concurrent use;
// it holds the device's read lock while it reads (2 ms at 100,000 peers,
// BenchmarkPeerStates100k).
func (d *Device) PeerStates(dst []PeerState) []PeerState {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.peerStatesLocked(dst)
}

// PeerStatesUpTo is PeerStates when the device has at most max peers,
// counted under the same read lock: with more it reports false and returns
// dst unchanged, having read none. A caller that exports per-peer data only
// up to a limit (wgpio's /metrics, MetricsPeers) so never reads more than
// max peers, however many are added between its own count and this call.
// Safe for concurrent use.
func (d *Device) PeerStatesUpTo(dst []PeerState, max int) ([]PeerState, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.peers.Len() > max {
		return dst, false
	}
	return d.peerStatesLocked(dst), true
}

// peerStatesLocked is PeerStates; d.mu held (read).
func (d *Device) peerStatesLocked(dst []PeerState) []PeerState {
	dst = slices.Grow(dst, d.peers.Len())
	for p := range d.peers.All {
		s := PeerState{
			PublicKey:     p.pub,
			LastHandshake: p.lastHandshake(),
			TxBytes:       p.fp.TxBytes.Load(),
			RxBytes:       p.fp.RxBytes.Load(),
		}
		if ep := p.fp.Endpoint.Load(); ep != nil {
			s.Endpoint = ep.Dst
		}
		dst = append(dst, s)
	}
	return dst
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
	p = &peer{fp: &fastpath.Peer{PublicKey: k}, pub: k, heapIdx: -1, listIdx: -1}
	if d.id != nil {
		p.hs = noise.NewHandshake(d.id, k, p.psk)
		d.precompute = append(d.precompute, p.hs)
	}
	d.peers.Add(p)
	d.byKey[k] = p
	d.byFP[p.fp] = p
	d.dirtyPeers[p] = struct{}{}
	d.created = append(d.created, p)
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

// removePeerLocked forgets p: its keypairs, indexes, handshake and allowed
// IPs. The caller publishes.
func (d *Device) removePeerLocked(p *peer) {
	d.forgetPeerLocked(p)
	d.peers.Remove(p)
}

// removeAllPeersLocked removes every peer. The caller publishes.
func (d *Device) removeAllPeersLocked() {
	for p := range d.peers.All {
		d.forgetPeerLocked(p)
	}
	d.peers.Reset()
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

// expireSessionLocked is what a change of the private key does to p's
// sessions, as the kernel (netlink set_device:
// wg_noise_expire_current_peer_keypairs) and wireguard-go
// (Peer.ExpireCurrentKeypairs) do it: the handshake in flight is dropped,
// Current and Next send no more (Keypair.ExpireSend), so that the next
// packet for p starts a handshake under the new key at once (no
// RekeyTimeout wait), and all three keypairs go on receiving what p
// still sends on them until they expire or a new session retires them.
// Before, they were cleared: what p sent on them was dropped
// (unknown_index) until p itself handshook again, up to 15 s and more
// for a peer that only sends. The packets held for the old handshake are
// dropped, as resetSessionLocked drops them. p.mu held.
func (d *Device) expireSessionLocked(p *peer) {
	p.initQueued = false
	p.fp.FlushHeld.Store(true)
	for _, kp := range []*fastpath.Keypair{p.fp.Current.Load(), p.fp.Next.Load()} {
		if kp != nil {
			kp.ExpireSend()
		}
	}
	d.dropPendingLocked(p)
	if p.hs != nil {
		p.hs.Clear()
	}
	p.retransmitAt, p.attempts = 0, 0
	p.initSent = false
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
		switch {
		case !kp.IsInitiator && !kp.Used():
			d.stats.unconfirmed.Add(1)
			if cur == nil || !cur.Used() {
				if p.unconfirmedRun++; p.unconfirmedRun >= pskRun {
					d.warnPSK(p, "responder", d.now())
				}
			}
		case kp.Used():
			p.unconfirmedRun = 0
		}
		d.dp.Retire(kp)
	}
	clear(p.owned[len(kept):])
	p.owned = kept
}
