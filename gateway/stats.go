package gateway

import (
	"strings"
	"sync/atomic"

	"github.com/wgpio/wgpio/internal/counts"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// DropReason says why the control plane dropped a message or could not
// send one. The UAPI has no field for drops (wireguard-go prints none), so
// they are reported by Stats only.
type DropReason uint8

// Drop reasons.
const (
	DropUnknownType          DropReason = iota // not a handshake message type (bad first four bytes)
	DropNoPrivateKey                           // the device has no private key yet
	DropHandshakeInvalid                       // refused by package noise (bad MAC1, stale timestamp, flood, decryption...; see Stats.Noise)
	DropUnknownPeer                            // initiation from a static key we do not know
	DropUnknownIndex                           // response or cookie reply for no handshake of ours
	DropRateLimited                            // per-source limit on handshakes with a valid MAC2 while under load (or the limiter's table full)
	DropIndexTableFull                         // no receiver index left
	DropNoEndpoint                             // something to send to a peer with no known endpoint
	DropMailboxFull                            // the dataplane refused a control packet (counted here alone: a fastpath.Engine's queue's mailbox_full counts its other mail)
	DropCookieBudget                           // cookie reply not sent: over CookieRepliesPerSecond (all sources)
	DropHandshakeStale                         // waited in the handshake pool's queue longer than REKEY_TIMEOUT: its sender has retried since
	DropHandshakeBacklogFull                   // the handshake pool's queue was full (Options.HandshakeBacklog)
	DropClosed                                 // still in the handshake pool's queue when the device closed (what the dataplane's queue held is its own closed), or a control packet the dataplane refused because it was closed (fastpath.Engine.Closed)
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"unknown type", "no private key", "handshake invalid", "unknown peer",
	"unknown index", "rate limited", "index table full", "no endpoint", "mailbox full",
	"cookie budget", "handshake stale", "handshake backlog full", "closed",
}

// String returns the short lowercase name.
func (r DropReason) String() string { return counts.Name(dropNames[:], r) }

// Key is the reason's name in JSON and metric labels: String in snake case.
func (r DropReason) Key() string { return strings.ReplaceAll(r.String(), " ", "_") }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// Stats are the device's counters at one moment (each read atomically).
type Stats struct {
	Drops DropCounts `json:"drops"`
	// InitiationsSent, ResponsesSent, CookieRepliesSent and KeepalivesSent
	// count the messages of each kind the dataplane took (Dataplane.Send
	// or SendWait returned true). One it refused is counted only as the
	// drop mailbox_full (closed, if it was closed); one it took and lost
	// after is in its own counters (fastpath's ring_full, no_wan_route,
	// closed...).
	InitiationsSent   uint64 `json:"initiations_sent"`
	ResponsesSent     uint64 `json:"responses_sent"`
	CookieRepliesSent uint64 `json:"cookie_replies_sent"`
	KeepalivesSent    uint64 `json:"keepalives_sent"` // by the control plane (timers, session confirmation)
	// PeersConfigured is a gauge: the peers of the configuration.
	PeersConfigured uint64 `json:"peers_configured"`
	// LiveSessions is a gauge: the peers whose current keypair is
	// confirmed and younger than RejectAfterTime (whitepaper §6.1), the
	// sessions that carry traffic now.
	LiveSessions uint64 `json:"live_sessions"`
	// KeypairsInstalledTotal counts every keypair a completed handshake
	// installed, as initiator or responder, confirmed or not.
	KeypairsInstalledTotal uint64 `json:"keypairs_installed_total"`
	// Sessions is KeypairsInstalledTotal under its old name, kept for
	// readers of earlier versions.
	//
	// Deprecated: it is not a count of live sessions; use LiveSessions or
	// KeypairsInstalledTotal.
	Sessions uint64 `json:"sessions"`
	// ResponderUnconfirmedTotal counts responder keypairs freed without
	// ever receiving data (replaced by a newer handshake, expired or
	// removed with their peer): the initiator never used them, which on
	// this side is the only sign of a preshared key mismatch. One that
	// received data only after both sides' handshakes crossed (moved to
	// Previous, never confirmed) was used, and is not counted
	// (fastpath.Keypair.Used).
	ResponderUnconfirmedTotal uint64 `json:"responder_keypairs_expired_unconfirmed_total"`
	// HandshakeBacklog is a gauge: the received handshake messages waiting
	// for the handshake pool; HandshakeBacklogPeak is the most seen at once
	// (under load from Options.HandshakeBacklog / 8).
	HandshakeBacklog     uint64 `json:"handshake_backlog"`
	HandshakeBacklogPeak uint64 `json:"handshake_backlog_peak"`
	// UAPIRefused counts the connections to the UAPI socket refused,
	// closed unserved (answered EAGAIN first, uapiserve.Refuse, unless 64
	// refusals were being answered already): over uapiMaxConns (64)
	// served at once, they waited uapiSlotWait (15 s) for a place, or
	// found 64 others waiting already (acceptloop.Server). Nonzero: a client holds connections
	// open, or opens them without end.
	UAPIRefused uint64              `json:"uapi_connections_refused"`
	Noise       noise.StatsSnapshot `json:"noise"`
}

type counters struct {
	drops             counts.Atomic[DropReason]
	initiationsSent   atomic.Uint64
	responsesSent     atomic.Uint64
	cookieRepliesSent atomic.Uint64
	keepalivesSent    atomic.Uint64
	sessions          atomic.Uint64 // keypairs installed
	unconfirmed       atomic.Uint64 // responder keypairs freed unconfirmed
}

func (c *counters) drop(r DropReason) { c.drops.Add(r, 1) }

// Stats returns the counters; Noise counts what every identity the
// device had did (one Stats for all its private keys), so that it counts
// since New as the rest do and its drops add up to
// Drops[DropHandshakeInvalid].
func (d *Device) Stats() Stats {
	var s Stats
	s.Drops = d.stats.drops.Load()
	s.InitiationsSent = d.stats.initiationsSent.Load()
	s.ResponsesSent = d.stats.responsesSent.Load()
	s.CookieRepliesSent = d.stats.cookieRepliesSent.Load()
	s.KeepalivesSent = d.stats.keepalivesSent.Load()
	s.KeypairsInstalledTotal = d.stats.sessions.Load()
	s.Sessions = s.KeypairsInstalledTotal
	s.ResponderUnconfirmedTotal = d.stats.unconfirmed.Load()
	s.HandshakeBacklog = uint64(len(d.pool.msgs))
	s.HandshakeBacklogPeak = uint64(d.pool.peak.Load())
	s.UAPIRefused = d.uapiConns.Refused()
	now := d.now()
	d.mu.RLock()
	s.Noise = d.noiseStats.Snapshot()
	s.PeersConfigured = uint64(d.peers.Len())
	for p := range d.peers.All {
		if kp := p.fp.Current.Load(); kp != nil && !kp.Dead() && kp.Confirmed() && now-kp.Created < int64(protocol.RejectAfterTime) {
			s.LiveSessions++
		}
	}
	d.mu.RUnlock()
	return s
}

// DropCounts counts drops by reason, indexed by DropReason. In JSON it is
// an object of the nonzero counts by reason name, which UnmarshalJSON reads
// back; an unknown name is an error. Its methods (those of
// internal/counts.Counts, which go doc does not list): List gives the
// nonzero counts as sorted "reason=count" strings (print that: %v prints
// the whole array), Total their sum, Add adds another's.
type DropCounts = counts.Counts[DropReason]

// InvalidReasons returns the reasons of Drops[DropHandshakeInvalid] from
// Noise.Drops, which count two more that the control plane counts apart
// (cookie_required: answered with a cookie reply under load; unknown_peer:
// its own reason): they add up to it.
func (s Stats) InvalidReasons() noise.DropCounts {
	nd := s.Noise.Drops
	nd[noise.DropCookieRequired], nd[noise.DropUnknownPeer] = 0, 0
	return nd
}

// Losses lists the nonzero drops as sorted "name=count" strings (names in
// snake case); handshake_invalid is followed by its breakdown by package
// noise's reasons, in parentheses. The breakdown leaves out the two noise
// reasons the control plane does not count as handshake_invalid: cookie
// required (answered with a cookie reply, or dropped as cookie_budget) and
// unknown peer (unknown_peer). Empty when nothing was dropped.
func (s Stats) Losses() []string {
	out := s.Drops.List()
	invalid := DropHandshakeInvalid.Key() + "="
	nd := s.InvalidReasons()
	if nl := nd.List(); len(nl) > 0 {
		for i, l := range out {
			if strings.HasPrefix(l, invalid) {
				out[i] += " (" + strings.Join(nl, " ") + ")"
			}
		}
	}
	return out
}
