package gateway

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// peer is the control plane's state of one peer. fp and pub are immutable;
// psk, allowed and listIdx are guarded by Device.mu; hs, keepalive and pkaBase are
// written under both Device.mu and mu and read under either; lastHSWall is
// atomic; the heap fields belong to Tick (Device.tickMu); every other field
// is guarded by mu.
type peer struct {
	fp      *fastpath.Peer
	pub     noise.PublicKey
	psk     noise.PresharedKey
	allowed prefixList       // masked, insertion order
	listIdx int              // position in Device.peers (peerList), -1 once out
	hs      *noise.Handshake // nil while the device has no private key
	// lastHS is the zeroed handshake of the last identity while the
	// device has none (hs nil): the next one inherits its record of
	// the peer's timestamps (noise.Handshake.Inherit). Guarded like hs.
	lastHS    *noise.Handshake
	keepalive uint16 // persistent keepalive interval, s
	published bool   // fp is in the dataplane's peer set

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
	// unconfirmedRun counts the responder keypairs freed in a row
	// without data while the peer had no session in use (warnPSK).
	unconfirmedRun int
	// pendingIndex is the receiver index of our handshake message in flight
	// (initiation), registered in Device.pending.
	pendingIndex uint32
	hasPending   bool

	lastInitSent int64 // when we last sent an initiation, or a response plus jitter (RekeyTimeout rate limit, §6.1; responseSentLocked)
	initSent     bool
	retransmitAt int64 // retry deadline, 0 = none (whitepaper §6.4)
	attempts     int
	zeroAt       int64        // key material zeroing deadline, 0 = none (§6.3)
	sentLastMin  bool         // the initiator's "last minute" rekey on receive
	freshSent    int64        // LastDataSent the rekey rules on sending last acted on
	lastHSWall   atomic.Int64 // wall time of the last completed handshake, Unix ns; 0 none

	ownSent   int64 // last authenticated packet the control plane sent
	ownRecv   int64 // last authenticated handshake message received
	kaArmedAt int64 // first data received since we last sent (§6.5)
	nhArmedAt int64 // first data sent since we last received
	nhJitter  int64
	nhRearm   int64 // new-handshake timer re-arms only for data after this
	pkaBase   int64 // when persistent keepalive was turned on
	// kaStaged: a keepalive found no usable session and started a
	// handshake; it is sent once one is usable (wireguard-go stages it
	// with the packets sent at key confirmation), so that a responder's
	// persistent keepalive starts with its session, not 10 s after.
	kaStaged bool
	// routedMAC is the next hop's MAC the resolver last gave, for the
	// endpoint's address routedDst (unmapped; any port: routes and
	// neighbours are the address's), set by followNeighbourLocked: the
	// endpoint's MAC is taken back when it is that one and the resolver
	// gives none now (the route went, Options.Routed, or moved to a next
	// hop not resolved yet), and again whenever it comes back so (a
	// roam's last hop, the old router) until the resolver gives one; a
	// handshake's last hop that is that one is not used while the
	// resolver gives none (dstMACFor). A MAC the resolver did not give
	// (the last hop of a roamed peer's packets, its route leading
	// elsewhere) is kept, unless the route went (routeGone). It is
	// replaced whenever the resolver gives one, never cleared: one left
	// from an older route only applies while the resolver has none for
	// the address, when the message waits for the route's next hop as
	// Linux's does.
	routedMAC [6]byte
	routedDst netip.Addr
	// routeGone: followNeighbourLocked took the endpoint's MAC back for
	// its route's going, and the resolver has given none since: a MAC
	// no route gave (a handshake's or a roam's last hop) is not used
	// while no route leads out of the WAN toward the endpoint.
	routeGone     bool
	handshakeDone bool // a session was ever established (for logs)

	// While NeedNeighbour stays set, endpoint nbrEP's next hop is
	// resolved again at nbrRetryAt, then after nbrBackoff, doubled each
	// time up to maxNeighbourBackoff (followNeighbourLocked); 0: at the
	// next evaluation.
	nbrEP      *fastpath.Endpoint
	nbrRetryAt int64
	nbrBackoff int64
	// nbrChanges is Options.ResolveChanges' count at the last
	// resolution of nbrEP: a count grown since ends the backoff.
	nbrChanges uint64
}
