package fastpath

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// Endpoint is where a peer's transport data goes: the outer destination and
// how to reach it on the WAN port. It is immutable once published; the
// control plane (or a worker, when roaming) replaces the whole value.
type Endpoint struct {
	// Dst is the peer's outer address and UDP port. An IPv4-mapped IPv6
	// address (as the UAPI keeps one written so) is sent to as IPv4.
	Dst netip.AddrPort
	// Src is our outer address (IPv4 or IPv6, the family of Dst): the WAN
	// address the peer's last authenticated packet was sent to, or for an
	// endpoint not heard from the one the kernel's route toward Dst
	// chooses (Routed). What is sent to the peer leaves from it while it
	// is one of the WAN's (Engine.SetWAN), else from the default
	// (wanaddrs.go).
	Src netip.Addr
	// Routed: Src is the route's choice (or the default of the family),
	// not an address a packet of the peer reached; the control plane
	// follows the route while it is set, and the first authenticated
	// packet from Dst clears it (Linux's WireGuard keeps the endpoint's
	// source only once a packet set it: drivers/net/wireguard/socket.c).
	Routed bool
	// DstMAC is the Ethernet address of the next hop toward Dst (Dst itself
	// when on-link, else its gateway's), SrcMAC the WAN port's. A zero
	// DstMAC means "not resolved yet": workers hold packets and set
	// NeedNeighbour, and drop them after 3 s of that wait alone
	// (expireHeld).
	DstMAC, SrcMAC [6]byte
}

// Stamps are the timer events of a peer, in ns of the control plane's clock
// (0 = never). Workers record them per queue and publish them at most once
// per PublishInterval (50 ms); the control plane's timers read them.
// Each field only grows (workers publish with an atomic max).
type Stamps struct {
	// LastSent: any packet sent to the peer (data or keepalive).
	LastSent atomic.Int64
	// LastReceived: any authenticated packet from the peer.
	LastReceived atomic.Int64
	// LastDataSent / LastDataReceived: transport data with a non-empty
	// payload (keepalives excluded), whitepaper §6.5.
	LastDataSent     atomic.Int64
	LastDataReceived atomic.Int64
}

// Peer is one WireGuard peer as the fast path sees it: its keypairs, its
// endpoint, its outer source ports, and the counters and timer stamps the
// workers publish.
//
// The control plane creates a Peer, registers it with Engine.UpdatePeers
// (or SetPeers) of one engine at a time (its ID indexes that engine's
// arrays: another engine refuses it until it leaves the first one's set
// or that engine closes), and writes the keypair slots and the endpoint through
// atomic pointers; workers on every queue read them without a lock. Fields
// set before the peer joins (PublicKey, ID, ports) are immutable afterwards.
type Peer struct {
	// The fields a worker reads for every peer of a burst come first, in
	// 32 bytes of the first cache line (ID, the source ports, Current and
	// Endpoint; see peerSize).

	// ID is a small dense number the engine assigns (UpdatePeers), indexing
	// per-queue arrays.
	ID int

	// SrcPortBase and SrcPorts define the outer UDP source ports used
	// toward this peer: an inner flow hashes to one of the SrcPorts ports
	// starting at SrcPortBase (SrcPorts = 1: SrcPortBase alone, as plain
	// WireGuard). SrcPortBase 0 means the listen port, and follows it when
	// it changes (Engine.SetWAN). SrcPorts 0 is set to Config.SourcePorts
	// (at least 1) when the peer joins (UpdatePeers, SetPeers).
	SrcPortBase uint16
	SrcPorts    uint16

	// Keypair slots (whitepaper §5.4.5 and §6): workers encrypt with
	// Current, and decrypt with any of the three; the first worker that
	// authenticates a packet with Next promotes it (Current → Previous,
	// Next → Current) by compare-and-swap and rings the control plane.
	Current atomic.Pointer[Keypair]

	// Endpoint is the current endpoint, nil until known.
	Endpoint atomic.Pointer[Endpoint]

	// Previous and Next: see Current.
	Previous, Next atomic.Pointer[Keypair]

	// PublicKey is the peer's static public key (for logs and UAPI).
	PublicKey [32]byte
	// Stamps are published by the workers; see Stamps.
	Stamps Stamps

	// TxBytes and RxBytes count the bytes of UDP payload sent to and
	// received from the peer: transport messages, published by the
	// workers with the stamps, and handshake messages (those received
	// added by the control plane once authenticated), as wireguard-go
	// and the kernel count them.
	TxBytes, RxBytes atomic.Uint64

	// HandshakeNeeded is set by a worker that had data for the peer and no
	// usable keypair (none, expired, or past [protocol.RekeyAfterMessages])
	// or no endpoint, never for an endpoint whose next hop lacks only its
	// MAC (NeedNeighbour), and by one whose packets held for that MAC
	// outlive their keypair; the control plane clears it when it starts a
	// handshake, or finds Current usable.
	HandshakeNeeded atomic.Bool
	// FlushHeld is set by the control plane when a handshake gives up
	// (whitepaper §6.4, after RekeyAttemptTime): every worker drops the
	// packets it holds for the peer (counted handshake_gave_up) and the
	// last one to look clears nothing — the flag is cleared by the next
	// HandshakeNeeded a worker raises.
	FlushHeld atomic.Bool
	// Removed is set by the control plane when the peer leaves the
	// configuration (or the device closes), and never cleared: every worker
	// drops the packets it holds for the peer (counted peer_removed) at its
	// next turn, within PublishInterval, and holds no more for it.
	Removed atomic.Bool
	// NeedNeighbour is set when the endpoint's next hop has no MAC yet.
	NeedNeighbour atomic.Bool

	// Promoted is set by the worker that moved Next to Current; the control
	// plane clears it (and learns the session is confirmed).
	Promoted atomic.Bool

	// slotMu serialises the slot transitions (Rotate, promotion,
	// ClearKeypairs) so that a worker promoting Next cannot overwrite a
	// keypair the control plane installed at the same moment. Readers
	// never take it: they load the slots atomically. Taken once per
	// session, never per packet.
	slotMu sync.Mutex

	// stampQueued and stampNext link the peer into the engine's list of
	// peers stamped since the control plane's last tick (stamped.go).
	stampQueued atomic.Bool
	stampNext   atomic.Pointer[Peer]

	// endpointSeen is when a worker last found the endpoint live: it saw
	// authenticated data from it in the interval it published, or roamed
	// to it (publish.go, markSeen). Written at most once per
	// PublishInterval by each worker, read by the others before they
	// roam.
	endpointSeen atomic.Int64

	// engine is the engine whose set the peer is in (nil: none), written
	// under that engine's peersMu when the peer joins or leaves: a peer's
	// ID indexes one engine's arrays, so it can be in one set only.
	engine atomic.Pointer[Engine]

	// holding is the number of workers that hold packets for the peer
	// (held.go): one more when a worker's first is held, one less when it
	// sends or drops the last. Written once per handshake's wait, never
	// per packet.
	holding atomic.Int32

	_ [peerPad]byte
}

// Holding reports whether some worker holds packets for the peer, waiting
// for a usable keypair. They go out with the first one that becomes usable
// (or are dropped when the handshake gives up): the control plane that
// completes a handshake as initiator then sends no keepalive of its own,
// since they confirm the session (whitepaper §5.4.6, §6.5; wireguard-go's
// SendKeepalive queues one only when nothing is staged).
func (p *Peer) Holding() bool { return p.holding.Load() > 0 }

// A Peer is peerSize bytes: the allocator's size class of that size puts
// every Peer on a 64-byte boundary, so that the fields workers read for
// every peer of a burst (ID to Endpoint) share one cache line
// (TestPeerLayout). A field added to Peer takes its room from peerPad.
const (
	peerSize = 192
	peerPad  = 4
)

// Rotate installs kp as the peer's new session the way the whitepaper's
// §5.4.5 requires for each role, and returns the keypair that fell out (for
// the control plane to unpublish from the index table and zero), or nil.
//
// The initiator starts using its keypair at once: Previous ← Current,
// Current ← kp. The responder must not send with a keypair before the
// initiator has used it, so kp goes to Next (and whatever was in Next
// falls out); a worker promotes it on first authenticated receipt.
// Called by the control plane only (one goroutine per peer at a time).
//
// An initiator's kp that finds a responder's keypair waiting in Next (both
// sides initiated at once: we answered the peer's initiation, then our own
// exchange completed) moves that keypair to Previous instead, and the
// old Current falls out, as the kernel's add_new_keypair and wireguard-go's
// BeginSymmetricSession do: the peer, the initiator of that session, sends
// with it from the moment it consumed our response, until our first message
// on kp promotes kp at its end, and what it sent meanwhile is still
// received. That keypair is never sent with (it stays unconfirmed; what
// arrives on it marks it used, Keypair.Used).
//
// When the initiator's Rotate pushes out two keypairs, it returns one; the
// control plane must sweep its keypairs against the slots to find every
// one that left, as it must after a promotion.
func (p *Peer) Rotate(kp *Keypair) (dropped *Keypair) {
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	if kp.IsInitiator {
		if n := p.Next.Swap(nil); n != nil {
			dropped = p.Previous.Swap(n)
			if c := p.Current.Load(); c != nil {
				dropped = c
			}
		} else {
			dropped = p.Previous.Swap(p.Current.Load())
		}
		p.Current.Store(kp)
		return dropped
	}
	return p.Next.Swap(kp)
}

// promote moves kp from Next to Current if it is still in Next; it returns
// whether this call promoted it. Safe for concurrent use by workers and the
// control plane: only the caller whose compare-and-swap wins rotates, under
// slotMu.
func (p *Peer) promote(kp *Keypair) (won bool) {
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	if !p.Next.CompareAndSwap(kp, nil) {
		return false
	}
	kp.confirm()
	old := p.Current.Swap(kp)
	p.Previous.Store(old)
	p.Promoted.Store(true)
	return true
}

// AddHolding is, for dataplanes other than Engine (test doubles), what a
// worker does when it holds its first packet for the peer (+1) and when
// its last one leaves or is dropped (−1): Holding reports their sum. The
// control plane resolves a next hop for held packets only while some
// are held (gateway's needNeighbour).
func (p *Peer) AddHolding(delta int) { p.holding.Add(int32(delta)) }

// Promote is, for dataplanes other than Engine (test doubles), what a
// worker does when authenticated data arrives on kp, a responder's
// keypair not yet confirmed (whitepaper §5.4.6): it promotes kp if kp
// waits in Next and returns whether this call did; elsewhere (in
// Previous, where Rotate moved it) it marks kp used (Keypair.Used).
func (p *Peer) Promote(kp *Keypair) bool { return p.receivedOn(kp) }

// receivedOn is Promote; workers call it for an unconfirmed kp only. A
// kp that was in Next at the load but not at the promotion (Rotate moved
// it to Previous in between) is marked used too; one another worker
// promoted is confirmed, and marking it changes nothing.
func (p *Peer) receivedOn(kp *Keypair) (promoted bool) {
	if p.Next.Load() == kp && p.promote(kp) {
		return true
	}
	if !kp.received.Load() {
		kp.received.Store(true)
	}
	return false
}

// ClearKeypairs removes all three keypairs and returns them (any may be
// nil), e.g. when the peer's key changes or it is removed.
func (p *Peer) ClearKeypairs() [3]*Keypair {
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	return [3]*Keypair{p.Current.Swap(nil), p.Previous.Swap(nil), p.Next.Swap(nil)}
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
