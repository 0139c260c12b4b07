package gateway

import (
	"strings"
	"sync/atomic"

	"github.com/wgpio/wgpio/internal/counts"
	"github.com/wgpio/wgpio/noise"
)

// DropReason says why the control plane dropped a message or could not
// send one. The UAPI has no field for drops (wireguard-go prints none), so
// they are reported by Stats only.
type DropReason uint8

// Drop reasons.
const (
	DropUnknownType      DropReason = iota // not a handshake message type (bad first four bytes)
	DropNoPrivateKey                       // the device has no private key yet
	DropHandshakeInvalid                   // refused by package noise (bad MAC1, stale timestamp, flood, decryption...; see Stats.Noise)
	DropUnknownPeer                        // initiation from a static key we do not know
	DropUnknownIndex                       // response or cookie reply for no handshake of ours
	DropRateLimited                        // per-source initiation rate limit while under load
	DropIndexTableFull                     // no receiver index left
	DropNoEndpoint                         // something to send to a peer with no known endpoint
	DropMailboxFull                        // the dataplane refused a control packet
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"unknown type", "no private key", "handshake invalid", "unknown peer",
	"unknown index", "rate limited", "index table full", "no endpoint", "mailbox full",
}

// String returns the short lowercase name.
func (r DropReason) String() string { return counts.Name(dropNames[:], r) }

// Key is the reason's name in JSON and metric labels: String in snake case.
func (r DropReason) Key() string { return strings.ReplaceAll(r.String(), " ", "_") }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// Stats are the device's counters at one moment (each read atomically).
type Stats struct {
	Drops             DropCounts          `json:"drops"`
	InitiationsSent   uint64              `json:"initiations_sent"`
	ResponsesSent     uint64              `json:"responses_sent"`
	CookieRepliesSent uint64              `json:"cookie_replies_sent"`
	KeepalivesSent    uint64              `json:"keepalives_sent"` // by the control plane (timers, session confirmation)
	Sessions          uint64              `json:"sessions"`        // keypairs installed
	Noise             noise.StatsSnapshot `json:"noise"`
}

type counters struct {
	drops             counts.Atomic[DropReason]
	initiationsSent   atomic.Uint64
	responsesSent     atomic.Uint64
	cookieRepliesSent atomic.Uint64
	keepalivesSent    atomic.Uint64
	sessions          atomic.Uint64
}

func (c *counters) drop(r DropReason) { c.drops.Add(r, 1) }

// Stats returns the counters; Noise is the current identity's (zero
// without a private key).
func (d *Device) Stats() Stats {
	var s Stats
	s.Drops = d.stats.drops.Load()
	s.InitiationsSent = d.stats.initiationsSent.Load()
	s.ResponsesSent = d.stats.responsesSent.Load()
	s.CookieRepliesSent = d.stats.cookieRepliesSent.Load()
	s.KeepalivesSent = d.stats.keepalivesSent.Load()
	s.Sessions = d.stats.sessions.Load()
	d.mu.Lock()
	if d.id != nil {
		s.Noise = d.id.Stats().Snapshot()
	}
	d.mu.Unlock()
	return s
}

// DropCounts counts drops by reason, indexed by DropReason. In JSON it is an
// object of the nonzero counts by reason name, which UnmarshalJSON reads
// back; an unknown name is an error.
type DropCounts = counts.Counts[DropReason]

// Losses lists the nonzero drops as sorted "name=count" strings (names in
// snake case); handshake_invalid is followed by its breakdown by package
// noise's reasons, in parentheses. Empty when nothing was dropped.
func (s Stats) Losses() []string {
	out := s.Drops.List()
	invalid := DropHandshakeInvalid.Key() + "="
	if nl := s.Noise.Drops.List(); len(nl) > 0 {
		for i, l := range out {
			if strings.HasPrefix(l, invalid) {
				out[i] += " (" + strings.Join(nl, " ") + ")"
			}
		}
	}
	return out
}
