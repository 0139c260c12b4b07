// Package gateway is wgpio's WireGuard control plane: peers and their
// configuration, the handshake pool, the timers, the keypair lifecycle,
// roaming, and configuration over the cross-platform UAPI.
//
// It implements, on top of package noise (the messages) and the fast path's
// shared types (fastpath.Peer, fastpath.Keypair, fastpath.IndexTable):
//
//   - the handshake state machine and session management of the WireGuard
//     whitepaper (J. A. Donenfeld, "WireGuard: Next Generation Kernel Network
//     Tunnel", revision e2da747), sections 5.4 (handshake, cookies under load)
//     and 6 (timers: rekey, reject, retry with jitter, give-up, keepalive,
//     persistent keepalive, zeroing of key material), with the constants of
//     section 6.1 as wireguard-go's device/constants.go spells them;
//   - the configuration protocol of https://www.wireguard.com/xplatform/
//     ("get=1" / "set=1" over a UNIX socket at /var/run/wireguard/<name>.sock,
//     served through golang.zx2c4.com/wireguard/ipc), so that wg(8) can show
//     and set a running device.
//
// # Clock
//
// Every protocol timer runs on an injected monotonic clock (Options.Now, in
// ns), and Device.Tick evaluates them at a given instant, so that tests run
// minutes of timers in milliseconds. The per-source rate limit of
// handshakes, the global bound on cookie replies and package noise's flood limit and cookie lifetimes use the
// same clock. Two things read wall time instead and are not affected by the
// injected clock: the TAI64N timestamp of handshake initiations (package
// noise: wall time by definition, since the responder compares it with the
// last one it accepted, possibly before a restart), and the
// last_handshake_time reported over the UAPI (Options.WallClock, Unix time
// as wg(8) expects).
//
// # Key material
//
// Every keypair the device publishes is tracked until it has left all three
// slots of its peer (rotated out, promoted over, rejected after
// RejectAfterTime, or dropped with the peer); then its receiver index is
// freed and it is retired (Dataplane.Retire): dead at once, so that no worker
// starts using it, and its keys (the chachapoly.Keys the keypair owns)
// erased once every worker has passed a batch boundary or was parked, which
// takes at most a tick (Tick calls Dataplane.Reap). The transport keys
// otherwise exist in our memory only between noise.Handshake.DeriveKeys and
// fastpath.NewKeypair, and are zeroed right after (noise.Keys.Zero). Only on
// a machine where package chachapoly uses its fallback does a key copy remain
// that cannot be erased: the one inside x/crypto's AEAD, left to the garbage
// collector (see chachapoly.Key). Handshake state is cleared on
// give-up and zeroing, and zeroed with its pre-shared key when a peer is
// removed; the identity's private key when the device closes or the key
// changes.
//
// # Timers from stamps
//
// The fast path's workers do not call back per packet; they publish per-peer
// stamps (fastpath.Stamps: last sent, last received, last data sent/received)
// at most every 50 ms, and flags (HandshakeNeeded, Promoted). Tick turns
// those into the events of whitepaper §6 (wireguard-go device/timers.go names
// the same events): an event "first data received since we last sent" is
// seen at the first Tick after the stamp moved, so a timer armed by a stamp
// fires up to one publish interval plus one tick interval (about 100 ms)
// late. That is well inside the jitter the protocol allows. The workers
// report which peers they stamped (fastpath.Engine.StampedPeers); Tick
// evaluates those and the peers whose deadline in its timer heap came, so
// that its work follows the timers due, not the number of peers, and the
// tick loop wakes for the earliest deadline, so a timer fires within a few
// ms of it.
//
// # Concurrency
//
// Handshake messages are processed by a pool of workers
// (Options.HandshakeWorkers, one per CPU by default) fed by a bounded queue
// (Options.HandshakeBacklog) whose fill decides "under load" (whitepaper
// §5.3). The Curve25519 work of a handshake runs under the lock of its peer
// only, never under the configuration lock the UAPI takes; the locks and
// their order are in the doc of Device.
//
// # Roaming
//
// The endpoint is set by the control plane from the outer source of every
// authenticated handshake message (initiation or response), and by the
// workers from authenticated transport data under the rule documented in
// package fastpath (move to the newest authenticated source only when no
// authenticated packet came from the current endpoint during one 50 ms
// interval), so that a peer spreading its source ports does not make the
// endpoint flip per packet.
//
// # Differences from wireguard-go
//
// The rules of whitepaper §6 are applied as wireguard-go's device/timers.go
// and send.go apply them, but for these deliberate differences, none of
// which a peer needs to know of:
//
//   - A keypair is unpublished and its keys erased when it reaches
//     RejectAfterTime (§6.2); wireguard-go leaves it in its slot, refused,
//     until it is rotated out or zeroed at RejectAfterTime × 3 (§6.3).
//   - The responder keeps its Previous keypair until its new Next is
//     promoted, where wireguard-go and the kernel drop Previous when Next
//     is installed: packets still in flight on the older session are
//     received a little longer.
//   - One passive keepalive (§6.5) answers all the data received before
//     it; wireguard-go sends a second one KeepaliveTimeout later when data
//     arrived while its keepalive timer was pending, even if the first was
//     sent after that data.
//   - Giving up a handshake (§6.4) clears its state at once, and zeroing
//     (§6.3) is armed when an exchange starts with no session behind it
//     as well as when a session is derived (wireguard-go arms it only then
//     and at the give-up), so that no ephemeral key outlives RejectAfterTime
//     × 3. A response that comes after the give-up is refused.
//   - Timers driven by the workers' stamps fire up to about 100 ms late (see
//     "Timers from stamps"), inside the jitter the protocol allows.
//   - TAI64N timestamps are made strictly increasing within the process
//     (package noise), so a wall clock stepped back does not make the
//     peers refuse our initiations until it catches up, as it does with
//     wireguard-go; across a restart the wall clock alone decides, as in
//     every implementation.
//   - Cookie replies are bounded over all sources together
//     (CookieRepliesPerSecond); wireguard-go sends one for every message
//     without a valid MAC2 under load.
//   - Under load the per-source limit of messages with a valid MAC2 is
//     applied before they are queued for the Curve25519 work, and cookie
//     replies are consumed without being queued; the kernel and
//     wireguard-go queue both and apply the limit when they take a
//     message, so one proven source, or spoofed cookie replies, can fill
//     their queue.
package gateway
