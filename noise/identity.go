package noise

import (
	"crypto/ecdh"
	"time"
)

// StaticIdentity is the local static key pair (section 5.4: S_priv, S_pub)
// and what is derived from it: the key that verifies MAC1 of messages sent
// to us, the responder's CookieChecker, and the counters of everything done
// with it. Make it with NewStaticIdentity; it is safe for concurrent use. To
// change the private key, make a new identity and new Handshakes.
type StaticIdentity struct {
	private PrivateKey
	scalar  *ecdh.PrivateKey // private as crypto/ecdh uses it; nil once zeroed
	public  PublicKey
	clock   func() time.Time
	stats   *Stats
	checker CookieChecker
}

// NewStaticIdentity returns the identity of private (one Curve25519
// operation to derive the public key). clock supplies the time for the
// initiation flood limit and the cookie lifetimes; nil means time.Now. The
// identity keeps its own copy of private; Zero erases it.
func NewStaticIdentity(private PrivateKey, clock func() time.Time) *StaticIdentity {
	return NewStaticIdentityCounting(private, clock, new(Stats))
}

// NewStaticIdentityCounting is NewStaticIdentity counting into stats
// (not nil), which may outlive the identity: a device whose private key
// changes keeps one Stats for all its identities, so that its counts go
// on across a change.
func NewStaticIdentityCounting(private PrivateKey, clock func() time.Time, stats *Stats) *StaticIdentity {
	if clock == nil {
		clock = time.Now
	}
	id := &StaticIdentity{private: private, clock: clock, stats: stats}
	if s, err := id.private.scalar(); err == nil { // never fails with 32 bytes
		id.scalar = s
		copy(id.public[:], s.PublicKey().Bytes())
	}
	id.stats.curve25519.Add(1)
	id.checker.init(&id.public, clock, id.stats)
	return id
}

// PublicKey returns the static public key.
func (id *StaticIdentity) PublicKey() PublicKey { return id.public }

// Stats returns the identity's counters, shared with its CookieChecker and
// every Handshake made with it (and with the other identities made with
// the same NewStaticIdentityCounting stats).
func (id *StaticIdentity) Stats() *Stats { return id.stats }

// CookieChecker returns the responder side of the cookie mechanism for
// messages sent to this identity.
func (id *StaticIdentity) CookieChecker() *CookieChecker { return &id.checker }

// Zero erases the private key and the cookie secret, and drops crypto/ecdh's
// copy of the key (which it cannot erase, see the package doc) for the
// garbage collector. The identity must not be used afterwards (a handshake
// with it fails).
func (id *StaticIdentity) Zero() {
	id.private.Zero()
	id.scalar = nil
	id.checker.zero()
}
