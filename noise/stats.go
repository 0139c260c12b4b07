package noise

import (
	"strings"
	"sync/atomic"

	"github.com/wgpio/wgpio/internal/counts"
)

// DropReason says why a message was rejected. It is an error: functions of
// this package return one as their error for bad input, so callers can test
// with errors.Is(err, noise.DropBadMAC1) or convert with errors.As. Boxing a
// DropReason in an error does not allocate.
type DropReason uint8

// Reasons a message is dropped.
const (
	DropWrongSize        DropReason = iota + 1 // length is not the message type's
	DropWrongType                              // first four bytes are not the expected type
	DropBadMAC1                                // MAC1 does not verify (section 5.4.4)
	DropCookieRequired                         // under load and MAC2 absent or invalid: answered with a cookie reply (section 5.4.7)
	DropUnknownPeer                            // the initiator's static key belongs to no peer
	DropStaleTimestamp                         // TAI64N not newer than the last accepted (replay; section 5.1)
	DropFlood                                  // initiation within HandshakeInitiationRate of the last accepted one
	DropDecryptFailed                          // an AEAD did not authenticate
	DropUnexpectedState                        // no outstanding handshake for this message (wrong state or receiver index)
	DropInvalidPublicKey                       // a Diffie-Hellman result was zero: low-order point, or peer key unusable
	DropNoMAC1Sent                             // cookie reply while we have sent no MAC1 it could answer

	// NumDropReasons is one more than the largest DropReason.
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropWrongSize:        "wrong size",
	DropWrongType:        "wrong type",
	DropBadMAC1:          "bad mac1",
	DropCookieRequired:   "cookie required",
	DropUnknownPeer:      "unknown peer",
	DropStaleTimestamp:   "stale timestamp",
	DropFlood:            "initiation flood",
	DropDecryptFailed:    "decryption failed",
	DropUnexpectedState:  "unexpected handshake state",
	DropInvalidPublicKey: "invalid public key",
	DropNoMAC1Sent:       "no mac1 sent",
}

// String returns the short lowercase name ("bad mac1").
func (r DropReason) String() string {
	if r < NumDropReasons && dropNames[r] != "" {
		return dropNames[r]
	}
	return "unknown drop reason"
}

// Key is the reason's name in JSON: String in snake case ("bad_mac1").
func (r DropReason) Key() string { return strings.ReplaceAll(r.String(), " ", "_") }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// Error implements error: "noise: bad mac1".
func (r DropReason) Error() string { return "noise: " + r.String() }

// Stats counts what a StaticIdentity and its Handshakes did. All fields are
// updated atomically; read them at any time from any goroutine.
type Stats struct {
	drops                 counts.Atomic[DropReason]
	curve25519            atomic.Uint64
	initiationsCreated    atomic.Uint64
	initiationsConsumed   atomic.Uint64
	responsesCreated      atomic.Uint64
	responsesConsumed     atomic.Uint64
	cookieRepliesCreated  atomic.Uint64
	cookieRepliesConsumed atomic.Uint64
}

// StatsSnapshot is a copy of Stats at one moment (each field read
// atomically, the whole not).
type StatsSnapshot struct {
	Drops                 DropCounts `json:"drops"`
	Curve25519            uint64     `json:"curve25519"` // Curve25519 scalar multiplications (key derivations and DH)
	InitiationsCreated    uint64     `json:"initiations_created"`
	InitiationsConsumed   uint64     `json:"initiations_consumed"`
	ResponsesCreated      uint64     `json:"responses_created"`
	ResponsesConsumed     uint64     `json:"responses_consumed"`
	CookieRepliesCreated  uint64     `json:"cookie_replies_created"`
	CookieRepliesConsumed uint64     `json:"cookie_replies_consumed"`
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	var o StatsSnapshot
	o.Drops = s.drops.Load()
	o.Curve25519 = s.curve25519.Load()
	o.InitiationsCreated = s.initiationsCreated.Load()
	o.InitiationsConsumed = s.initiationsConsumed.Load()
	o.ResponsesCreated = s.responsesCreated.Load()
	o.ResponsesConsumed = s.responsesConsumed.Load()
	o.CookieRepliesCreated = s.cookieRepliesCreated.Load()
	o.CookieRepliesConsumed = s.cookieRepliesConsumed.Load()
	return o
}

// Dropped returns how many messages were dropped for reason r.
func (s *Stats) Dropped(r DropReason) uint64 {
	if r >= NumDropReasons {
		return 0
	}
	return s.drops[r].Load()
}

// Curve25519Operations returns how many Curve25519 scalar multiplications
// were done (public key derivations and Diffie-Hellman).
func (s *Stats) Curve25519Operations() uint64 { return s.curve25519.Load() }

// Refused counts a message its caller refused for r before handing it to
// the package (a gateway that reads a cookie reply's receiver itself, and
// refuses one of the wrong size), so that every message the gateway
// counts as invalid has its reason here too. Safe for concurrent use.
func (s *Stats) Refused(r DropReason) {
	if r < NumDropReasons {
		s.drops[r].Add(1)
	}
}

// drop counts r and returns it as the error to give back.
func (s *Stats) drop(r DropReason) error {
	s.drops[r].Add(1)
	return r
}

// DropCounts counts drops by reason, indexed by DropReason. In JSON it is
// an object of the nonzero counts by reason name, which UnmarshalJSON reads
// back; an unknown name is an error. Its methods (those of
// internal/counts.Counts, which go doc does not list): List gives the
// nonzero counts as sorted "reason=count" strings (print that: %v prints
// the whole array), Total their sum, Add adds another's.
type DropCounts = counts.Counts[DropReason]
