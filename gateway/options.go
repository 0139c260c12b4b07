package gateway

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// DefaultTickInterval is how often Start evaluates the timers: the workers
// publish their stamps at most this often (fastpath.PublishInterval), so
// ticking faster would see nothing new.
const DefaultTickInterval = fastpath.PublishInterval

// Options configures a Device.
type Options struct {
	// Name names the UAPI socket /var/run/wireguard/<Name>.sock that Start
	// serves; empty means no socket (the Go API and IpcGet/IpcSet only).
	Name string
	// PrivateKey is the static private key; zero means none yet (set it
	// later through the UAPI or SetPrivateKey; no handshake is possible
	// before).
	PrivateKey noise.PrivateKey
	// ListenPort is reported over the UAPI as listen_port (zero with a
	// *fastpath.Engine as Dataplane: the engine's). The dataplane owns the
	// port; a UAPI set of another port is recorded, or, with
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
	// Required. A *fastpath.Engine takes one Device at a time: New
	// refuses a second until the first is closed (Close it even when its
	// Start failed).
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
	// may be nil (and Known with it): then an endpoint learned from a
	// received handshake uses the frame's source MAC (the last hop, right
	// when the peer is on-link or behind the same router), and a
	// configured endpoint keeps the MAC its address had (one set again
	// unchanged: wg syncconf), else starts unresolved, its data held, then
	// dropped as no_neighbour, until a handshake brings one: a peer's
	// endpoint moved to a new address while its session runs gets nothing
	// until the next handshake, up to 15 s later (KeepaliveTimeout +
	// RekeyTimeout, whitepaper §6.5). A dataplane that resolves next hops
	// (fastpath.Config.WANResolver) is better given here too.
	Resolve func(dst netip.Addr) (mac [6]byte, ok bool)
	// Known is Resolve without the request: the MAC if the neighbour
	// table has it now, and nothing sent to the network otherwise. A
	// configured endpoint's next hop, and that of a peer whose packets
	// no longer wait for one, are looked up with it, as Linux's wg0
	// resolves a next hop only when it sends there (a peer configured,
	// an idle one, sends nothing: no ARP/NDP, no neighbour entry); a
	// packet held for the MAC, or a control message to send, asks with
	// Resolve. nil: Resolve.
	Known func(dst netip.Addr) (mac [6]byte, ok bool)
	// ResolveChanges, if not nil, returns a count that grows whenever
	// Resolve's answers may have changed (a route or a next hop's
	// neighbour entry did): a peer whose endpoint's next hop has no MAC
	// is resolved again at its next evaluation after a change, not only
	// when its backoff (up to 1 s) ends, as Linux sends through a
	// route's new next hop at the next packet and sends what it queued
	// on a neighbour entry at its answer. nil: only the backoff.
	ResolveChanges func() uint64
	// Routed reports whether a route toward dst leads out of the WAN
	// (fastpath.WANRoutes.HasRoute); nil: assume so. An endpoint whose
	// route goes (deleted, a blackhole, unreachable or prohibit route,
	// or one out of another interface) loses its next hop's MAC at the
	// next tick, so that the workers stop sending to the old next hop
	// and hold its packets until a route and a neighbour come back, as
	// Linux's route lookup on every send stops its wg0's; while none
	// comes back, a handshake or roam of the peer's does not bring a MAC
	// back either (the frame's last hop is not used). A handshake
	// message from any endpoint the WAN has no route to is answered at
	// no MAC (the workers hold the reply, then count it no_wan_route):
	// the frame's source MAC answers only where a route leads out of
	// the WAN and its next hop is not resolved yet, and not when it is
	// the MAC the resolver gave for the peer's endpoint's address before
	// it had none (the route moved to a silent next hop: the peer's
	// handshake comes through the old router). With it, an
	// endpoint whose resolver gives no MAC now (its route moved to a
	// next hop not resolved yet) loses the old next hop's too. Without
	// it the MAC of before was kept for as long as the session lasted
	// (and its rekeys: through an endpoint an administrator had
	// blackholed).
	Routed func(dst netip.Addr) bool
	// WANMAC is our Ethernet address on the WAN port, the source of the
	// frames sent to the peers (Endpoint.SrcMAC). Zero with a
	// *fastpath.Engine as Dataplane: its WAN port's.
	WANMAC [6]byte
	// WANInterface is the WAN port's interface name: an endpoint given
	// over the UAPI with an IPv6 zone is accepted only when the zone names
	// it (or its index, WANIndex).
	WANInterface string
	WANIndex     int
	// WANAddr4 and WANAddr6 are our outer addresses, the default source of
	// each family: of what we send to a configured endpoint when Source is
	// nil or has no answer.
	WANAddr4, WANAddr6 netip.Addr
	// Source, if set, gives the source the kernel's route toward an
	// endpoint chooses (see RouteSources; nil: the WANAddr4 or WANAddr6
	// of the endpoint's family): what we send to a peer not heard from
	// leaves from it, as Linux's WireGuard sends with its route lookup's
	// source. Its Source, which may ask the
	// kernel, is called with no lock of the device held: before the
	// first initiation to such a peer, when the WAN's addresses change
	// (SetWANAddrs) and when routes change (RefreshSources); applying a
	// configuration reads only its Cached answers (routesrc.go).
	Source RouteSources
	// TickInterval is how often Start runs Tick; 0 means
	// DefaultTickInterval (50 ms). New refuses a negative one.
	TickInterval time.Duration
	// Jitter returns the random delay added to each handshake retry, in
	// [0, protocol.RekeyTimeoutJitterMax). Default: math/rand/v2. Tests fix it.
	// It is called from several goroutines at once.
	Jitter func() time.Duration
	// HandshakeWorkers is the number of goroutines Start runs to process
	// handshake messages and send initiations (the Curve25519 work), like
	// the kernel's per-device workqueue and wireguard-go's per-CPU
	// handshake workers. 0 means runtime.GOMAXPROCS(0); New refuses a
	// negative count.
	HandshakeWorkers int
	// HandshakeBacklog is the capacity of the pool's queue of admitted
	// handshake messages (those that need Curve25519 work); under load
	// (cookie replies at admission) from an eighth full; beyond it
	// handshake_backlog_full. 0 means DefaultHandshakeBacklog; New
	// refuses a negative one.
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
	// §6.5), whole seconds up to 65535 (AddPeer refuses others: 500 ms
	// would otherwise round to 0, which disables it); 0 disables it.
	PersistentKeepalive time.Duration
	// AllowedIPs are the prefixes routed to the peer (and accepted from it).
	// A prefix already held by another peer moves to this one.
	AllowedIPs []netip.Prefix
}

// check refuses what AddPeers cannot apply: a persistent keepalive that is
// not whole seconds from 0 to 65535 (the UAPI's range), and the zero
// netip.Prefix among the allowed IPs (netip.ParsePrefix never gives one),
// which the dataplane would refuse after the device had taken the peer.
func (c PeerConfig) check() error {
	if c.PersistentKeepalive < 0 || c.PersistentKeepalive > 65535*time.Second || c.PersistentKeepalive%time.Second != 0 {
		return fmt.Errorf("gateway: peer %s: persistent keepalive %v is not whole seconds from 0 to 65535", c.PublicKey, c.PersistentKeepalive)
	}
	for _, pfx := range c.AllowedIPs {
		if !pfx.IsValid() {
			return fmt.Errorf("gateway: peer %s: allowed IP %v is not a valid prefix", c.PublicKey, pfx)
		}
	}
	return nil
}

// PeerState is a peer's state without its configuration, as PeerStates
// reports it: what counters and dashboards read of every peer.
type PeerState struct {
	PublicKey noise.PublicKey
	// Endpoint is where the peer's packets go now (roaming moves it);
	// invalid: none known yet.
	Endpoint netip.AddrPort
	// LastHandshake is the wall time of the last completed handshake, zero
	// if none.
	LastHandshake time.Time
	// TxBytes and RxBytes are the bytes of transport and handshake
	// messages sent to and received from the peer (fastpath.Peer's).
	TxBytes, RxBytes uint64
}

// PeerStatus is a peer's configuration and state as Peers reports it.
type PeerStatus struct {
	PeerConfig
	// LastHandshake is the wall time of the last completed handshake, zero
	// if none.
	LastHandshake time.Time
	// TxBytes and RxBytes are the bytes of transport and handshake
	// messages sent to and received from the peer (fastpath.Peer's).
	TxBytes, RxBytes uint64
}
