package noise

import (
	"crypto/ecdh"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.zx2c4.com/wireguard/tai64n"
)

// State is where a Handshake is in the exchange of section 5.4.
type State uint8

// Handshake states.
const (
	StateZeroed             State = iota // nothing in progress
	StateInitiationCreated               // initiator: initiation sent, waiting for the response
	StateInitiationConsumed              // responder: initiation accepted, response not made yet
	StateResponseCreated                 // responder: response made; DeriveKeys next
	StateResponseConsumed                // initiator: response accepted; DeriveKeys next
)

func (s State) String() string {
	switch s {
	case StateZeroed:
		return "zeroed"
	case StateInitiationCreated:
		return "initiation created"
	case StateInitiationConsumed:
		return "initiation consumed"
	case StateResponseCreated:
		return "response created"
	case StateResponseConsumed:
		return "response consumed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ErrState is wrapped by CreateResponse and DeriveKeys when the handshake is
// not in the state they need; it is a caller's sequencing error, not bad
// input.
var ErrState = errors.New("wrong handshake state")

// Keys are a session's symmetric keys and indexes, the product of a
// completed handshake (section 5.4.5). The control plane builds the
// session's ciphers from them and then calls Zero. wgpio's fast path
// expands them into chachapoly.Keys (fastpath.NewKeypair), which it erases
// when the session ends; an AEAD from x/crypto's chacha20poly1305.New keeps
// a copy of its own, which cannot be zeroed (see the package doc).
type Keys struct {
	Send, Receive [KeySize]byte
	LocalIndex    uint32 // our receiver index: transport data to us carries it
	RemoteIndex   uint32 // the peer's: we put it in transport data we send
	IsInitiator   bool   // we sent the initiation (only the initiator rekeys on time)
}

// Zero overwrites the keys with zeros.
func (k *Keys) Zero() {
	clear(k.Send[:])
	clear(k.Receive[:])
}

// Handshake is the handshake state of one peer (section 5.4), in either
// role. Make it with NewHandshake; methods are safe for concurrent use (one
// mutex). It also holds the peer's CookieGenerator, the newest TAI64N
// timestamp accepted from the peer and the time of the last accepted
// initiation, which outlive each exchange.
//
// Receiver indexes are the caller's: it allocates a random unique index for
// each initiation or response it creates (its index table), passes it in,
// and releases the previous one, LocalIndex before the call. After
// DeriveKeys the index belongs to the keypair.
type Handshake struct {
	id           *StaticIdentity // immutable
	remoteStatic PublicKey       // immutable
	cookies      CookieGenerator
	timestamp    func() tai64n.Timestamp // tai64n.Now; tests replace it

	mu                sync.Mutex
	psk               PresharedKey
	staticStatic      [KeySize]byte // DH(our static, peer's static), computed once (staticStaticLocked)
	ssState           uint8         // ssUnknown, ssOK, ssInvalid
	state             State
	hash              [KeySize]byte
	chainKey          [KeySize]byte
	localEphemeral    PrivateKey
	ephemeral         *ecdh.PrivateKey // localEphemeral as crypto/ecdh uses it
	remoteEphemeral   PublicKey
	localIndex        uint32
	remoteIndex       uint32
	lastTimestamp     tai64n.Timestamp // newest accepted from the peer
	lastSentTimestamp tai64n.Timestamp // newest we sent
	lastConsumed      time.Time        // when the last initiation was accepted
	hasConsumed       bool
}

// States of Handshake.staticStatic.
const (
	ssUnknown uint8 = iota // not computed yet
	ssOK                   // computed
	ssInvalid              // the peer's key is a low-order point, or the handshake was zeroed
)

// NewHandshake returns the handshake state for the peer whose static public
// key is remote, with pre-shared key psk (zero for none), bound to id. It
// does no Curve25519 work: DH(id's private key, remote), which every
// handshake with the peer uses, is computed by Precompute or by the first
// handshake message, once, so that configuring 100,000 peers is not
// 100,000 Curve25519 operations in a row. A remote key that is a low-order
// point is accepted here, as wireguard-go accepts it in its configuration,
// but every handshake with it fails with DropInvalidPublicKey.
func NewHandshake(id *StaticIdentity, remote PublicKey, psk PresharedKey) *Handshake {
	h := &Handshake{id: id, remoteStatic: remote, psk: psk, timestamp: tai64n.Now}
	h.cookies.init(&remote, id.clock, id.stats)
	return h
}

// Inherit takes over from old, the peer's handshake with a previous
// identity (the private key changed), what outlives an exchange and does
// not depend on our key: the newest TAI64N timestamp accepted from the
// peer and the time of the last accepted initiation (section 5.4.2: a
// replay stays refused, as the kernel's and wireguard-go's handshake
// keeps them across a key change), and the newest timestamp we sent. h
// is new and unused; old is only read. Safe for concurrent use.
func (h *Handshake) Inherit(old *Handshake) {
	old.mu.Lock()
	ts, sent, at, has := old.lastTimestamp, old.lastSentTimestamp, old.lastConsumed, old.hasConsumed
	old.mu.Unlock()
	h.mu.Lock()
	h.lastTimestamp, h.lastSentTimestamp, h.lastConsumed, h.hasConsumed = ts, sent, at, has
	h.mu.Unlock()
}

// Precompute computes DH(our static, the peer's static) now if no
// handshake did yet (one Curve25519 operation), so that the first
// handshake does not pay for it; callers run it off their own locks, e.g.
// in the background after adding many peers. Safe for concurrent use; a
// zeroed handshake is left alone.
func (h *Handshake) Precompute() {
	h.mu.Lock()
	h.staticStaticLocked()
	h.mu.Unlock()
}

// staticStaticLocked makes h.staticStatic valid if it can and reports
// whether it is (false: the peer's key is a low-order point, or h was
// zeroed). h.mu held.
func (h *Handshake) staticStaticLocked() bool {
	if h.ssState == ssUnknown {
		h.ssState = ssInvalid
		if dh(&h.staticStatic, h.id.scalar, &h.remoteStatic, h.id.stats) == nil {
			h.ssState = ssOK
		}
	}
	return h.ssState == ssOK
}

// RemoteStatic returns the peer's static public key.
func (h *Handshake) RemoteStatic() PublicKey { return h.remoteStatic }

// Identity returns the identity the handshake was made with.
func (h *Handshake) Identity() *StaticIdentity { return h.id }

// CookieGenerator returns the peer's cookie generator.
func (h *Handshake) CookieGenerator() *CookieGenerator { return &h.cookies }

// SetPresharedKey replaces the pre-shared key (zero for none); it applies to
// the next message created or consumed.
func (h *Handshake) SetPresharedKey(psk PresharedKey) {
	h.mu.Lock()
	h.psk = psk
	h.mu.Unlock()
}

// State returns the current state.
func (h *Handshake) State() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// LocalIndex returns the receiver index of the handshake in progress (0 if
// none): the one the caller must release when replacing or abandoning it.
func (h *Handshake) LocalIndex() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.localIndex
}

// LastTimestamp returns the newest TAI64N timestamp accepted from the peer.
func (h *Handshake) LastTimestamp() tai64n.Timestamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastTimestamp
}

// Clear abandons the exchange in progress (for example when the initiator
// gives up after RekeyAttemptTime): it zeroes the ephemeral keys, the
// chaining key and the hash and returns to StateZeroed. The replay and flood
// records and the cookie stay. It returns the local index that was in use,
// for the caller to release.
func (h *Handshake) Clear() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	idx := h.localIndex
	h.clearLocked()
	return idx
}

func (h *Handshake) clearLocked() {
	h.localEphemeral.Zero()
	h.ephemeral = nil
	clear(h.remoteEphemeral[:])
	clear(h.chainKey[:])
	clear(h.hash[:])
	h.localIndex = 0
	h.remoteIndex = 0
	h.state = StateZeroed
}

// Zero erases everything secret the handshake holds, including the
// pre-shared key, the precomputed static-static secret and the cookie; for
// a peer being removed. The handshake must not be used afterwards.
func (h *Handshake) Zero() {
	h.mu.Lock()
	h.clearLocked()
	h.psk.Zero()
	clear(h.staticStatic[:])
	h.ssState = ssInvalid
	h.mu.Unlock()
	h.cookies.zero()
}

// nextTimestamp returns the current TAI64N, made strictly greater than the
// last one we sent (bumped by one unit in the last place when the clock did
// not move past it: tai64n rounds the nanoseconds down to 2^24 ns, so two
// initiations 10 ms apart would otherwise carry the same timestamp and the
// second would be refused as a replay). h.mu held.
func (h *Handshake) nextTimestamp() tai64n.Timestamp {
	ts := h.timestamp()
	if !ts.After(h.lastSentTimestamp) {
		ts = h.lastSentTimestamp
		for i := len(ts) - 1; i >= 0; i-- {
			ts[i]++
			if ts[i] != 0 {
				break
			}
		}
	}
	h.lastSentTimestamp = ts
	return ts
}

var zeroNonce [chacha20poly1305.NonceSize]byte

// newEphemeral makes a fresh ephemeral key pair: one Curve25519 operation.
func (h *Handshake) newEphemeral() (PublicKey, error) {
	k, err := NewPrivateKey()
	if err != nil {
		return PublicKey{}, err
	}
	h.localEphemeral = k
	k.Zero()
	h.id.stats.curve25519.Add(1)
	if h.ephemeral, err = h.localEphemeral.scalar(); err != nil {
		return PublicKey{}, err
	}
	return PublicKey(h.ephemeral.PublicKey().Bytes()), nil
}

// CreateInitiation writes a handshake initiation into dst (section 5.4.2)
// with sender index localIndex, MAC1, and MAC2 if the peer gave us a fresh
// cookie, and enters StateInitiationCreated, replacing any exchange in
// progress (the caller releases the previous LocalIndex). Two Curve25519
// operations. The timestamp is wall time (tai64n.Now). It fails with
// DropInvalidPublicKey if the peer's key is a low-order point, or when
// crypto/rand fails.
func (h *Handshake) CreateInitiation(dst *[InitiationSize]byte, localIndex uint32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.id.stats
	h.clearLocked()
	if !h.staticStaticLocked() {
		return DropInvalidPublicKey
	}
	clear(dst[:])
	hash, ck := initialHash, initialChainKey
	defer clear(hash[:])
	defer clear(ck[:])
	mixHash(&hash, &hash, h.remoteStatic[:])

	epub, err := h.newEphemeral()
	if err != nil {
		return fmt.Errorf("create initiation: %w", err)
	}
	copy(dst[InitiationOffsetEphemeral:], epub[:])
	kdf1(&ck, ck[:], epub[:])
	mixHash(&hash, &hash, epub[:])

	var ss, key [KeySize]byte
	defer clear(ss[:])
	defer clear(key[:])
	if err := dh(&ss, h.ephemeral, &h.remoteStatic, st); err != nil {
		h.clearLocked()
		return err
	}
	kdf2(&ck, &key, ck[:], ss[:])
	aead, _ := chacha20poly1305.New(key[:])
	aead.Seal(dst[InitiationOffsetStatic:InitiationOffsetStatic], zeroNonce[:], h.id.public[:], hash[:])
	mixHash(&hash, &hash, dst[InitiationOffsetStatic:InitiationOffsetTimestamp])

	kdf2(&ck, &key, ck[:], h.staticStatic[:])
	ts := h.nextTimestamp()
	aead, _ = chacha20poly1305.New(key[:])
	aead.Seal(dst[InitiationOffsetTimestamp:InitiationOffsetTimestamp], zeroNonce[:], ts[:], hash[:])
	mixHash(&hash, &hash, dst[InitiationOffsetTimestamp:InitiationOffsetMAC1])

	dst[0] = TypeInitiation
	binary.LittleEndian.PutUint32(dst[InitiationOffsetSender:], localIndex)
	h.cookies.AddMACs(dst[:])

	h.hash, h.chainKey = hash, ck
	h.localIndex = localIndex
	h.state = StateInitiationCreated
	st.initiationsCreated.Add(1)
	return nil
}

// ConsumeInitiation processes msg, a handshake initiation sent to id
// (section 5.4.2), and returns the handshake of the peer that sent it, now
// in StateInitiationConsumed. lookup maps the initiator's static public key
// to that peer's Handshake (made with id), or nil for no such peer; it is
// called at most once, without any lock of this package held.
//
// MAC1 is verified first, before any Curve25519 work, even if the caller ran
// CookieChecker.Check (MAC2 and the load rule are Check's). An initiation is
// refused if its timestamp is not newer than the newest accepted from the
// peer (a replay: DropStaleTimestamp) or if it comes within
// HandshakeInitiationRate of the last accepted one on the identity's clock
// (DropFlood). An exchange we had in progress with the peer is abandoned
// (both sides initiating at once: the newest initiation wins, as in
// wireguard-go); its LocalIndex stays set until CreateResponse replaces it.
// Errors are DropReasons and are counted. msg is not kept.
func (id *StaticIdentity) ConsumeInitiation(msg []byte, lookup func(PublicKey) *Handshake) (*Handshake, error) {
	st := id.stats
	if len(msg) != InitiationSize {
		return nil, st.drop(DropWrongSize)
	}
	if binary.LittleEndian.Uint32(msg) != TypeInitiation {
		return nil, st.drop(DropWrongType)
	}
	if !checkMAC1(&id.checker.mac1Key, msg, InitiationOffsetMAC1) {
		return nil, st.drop(DropBadMAC1)
	}

	var hash, ck, ss, key [KeySize]byte
	defer clear(hash[:])
	defer clear(ck[:])
	defer clear(ss[:])
	defer clear(key[:])
	var epub PublicKey
	copy(epub[:], msg[InitiationOffsetEphemeral:InitiationOffsetStatic])
	mixHash(&hash, &initialHash, id.public[:])
	mixHash(&hash, &hash, epub[:])
	kdf1(&ck, initialChainKey[:], epub[:])
	if err := dh(&ss, id.scalar, &epub, st); err != nil {
		return nil, st.drop(DropInvalidPublicKey)
	}
	kdf2(&ck, &key, ck[:], ss[:])
	var peer PublicKey
	aead, _ := chacha20poly1305.New(key[:])
	if _, err := aead.Open(peer[:0], zeroNonce[:], msg[InitiationOffsetStatic:InitiationOffsetTimestamp], hash[:]); err != nil {
		return nil, st.drop(DropDecryptFailed)
	}
	mixHash(&hash, &hash, msg[InitiationOffsetStatic:InitiationOffsetTimestamp])

	h := lookup(peer)
	if h == nil || h.id != id {
		return nil, st.drop(DropUnknownPeer)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.staticStaticLocked() {
		return nil, st.drop(DropInvalidPublicKey)
	}
	kdf2(&ck, &key, ck[:], h.staticStatic[:])
	var ts tai64n.Timestamp
	aead, _ = chacha20poly1305.New(key[:])
	if _, err := aead.Open(ts[:0], zeroNonce[:], msg[InitiationOffsetTimestamp:InitiationOffsetMAC1], hash[:]); err != nil {
		return nil, st.drop(DropDecryptFailed)
	}
	mixHash(&hash, &hash, msg[InitiationOffsetTimestamp:InitiationOffsetMAC1])

	if !ts.After(h.lastTimestamp) {
		return nil, st.drop(DropStaleTimestamp)
	}
	now := id.clock()
	if h.hasConsumed && now.Sub(h.lastConsumed) <= HandshakeInitiationRate {
		return nil, st.drop(DropFlood)
	}

	idx := h.localIndex // still in the caller's table: CreateResponse replaces it
	h.clearLocked()
	h.localIndex = idx
	h.hash, h.chainKey = hash, ck
	h.remoteEphemeral = epub
	h.remoteIndex = binary.LittleEndian.Uint32(msg[InitiationOffsetSender:])
	h.lastTimestamp = ts
	h.lastConsumed, h.hasConsumed = now, true
	h.state = StateInitiationConsumed
	st.initiationsConsumed.Add(1)
	return h, nil
}

// CreateResponse writes the handshake response to the consumed initiation
// into dst (section 5.4.3), with sender index localIndex, MAC1, and MAC2 if
// the peer gave us a fresh cookie; it enters StateResponseCreated, after
// which DeriveKeys gives the session. Three Curve25519 operations. It needs
// StateInitiationConsumed (else an error wrapping ErrState). The local index
// the handshake had before is the caller's to release.
func (h *Handshake) CreateResponse(dst *[ResponseSize]byte, localIndex uint32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.id.stats
	if h.state != StateInitiationConsumed {
		return fmt.Errorf("create response in state %v: %w", h.state, ErrState)
	}
	clear(dst[:])
	hash, ck := h.hash, h.chainKey
	var ss, key, tau [KeySize]byte
	defer clear(hash[:])
	defer clear(ck[:])
	defer clear(ss[:])
	defer clear(key[:])
	defer clear(tau[:])

	epub, err := h.newEphemeral()
	if err != nil {
		return fmt.Errorf("create response: %w", err)
	}
	copy(dst[ResponseOffsetEphemeral:], epub[:])
	mixHash(&hash, &hash, epub[:])
	kdf1(&ck, ck[:], epub[:])
	if err := dh(&ss, h.ephemeral, &h.remoteEphemeral, st); err != nil {
		h.clearLocked()
		return err
	}
	kdf1(&ck, ck[:], ss[:])
	if err := dh(&ss, h.ephemeral, &h.remoteStatic, st); err != nil {
		h.clearLocked()
		return err
	}
	kdf1(&ck, ck[:], ss[:])
	kdf3(&ck, &tau, &key, ck[:], h.psk[:])
	mixHash(&hash, &hash, tau[:])
	aead, _ := chacha20poly1305.New(key[:])
	aead.Seal(dst[ResponseOffsetEmpty:ResponseOffsetEmpty], zeroNonce[:], nil, hash[:])
	mixHash(&hash, &hash, dst[ResponseOffsetEmpty:ResponseOffsetMAC1])

	dst[0] = TypeResponse
	binary.LittleEndian.PutUint32(dst[ResponseOffsetSender:], localIndex)
	binary.LittleEndian.PutUint32(dst[ResponseOffsetReceiver:], h.remoteIndex)
	h.cookies.AddMACs(dst[:])

	h.hash, h.chainKey = hash, ck
	h.localIndex = localIndex
	h.state = StateResponseCreated
	st.responsesCreated.Add(1)
	return nil
}

// MessageReceiver returns the receiver index of a handshake response
// (bytes 8..12), a cookie reply or transport data (bytes 4..8): the caller's
// key into its index table to find the Handshake or keypair to give msg to.
// ok is false for a message that is none of those by type and size. It
// does not allocate.
func MessageReceiver(msg []byte) (receiver uint32, ok bool) {
	if len(msg) < 4 {
		return 0, false
	}
	switch t := binary.LittleEndian.Uint32(msg); {
	case t == TypeResponse && len(msg) == ResponseSize:
		return binary.LittleEndian.Uint32(msg[ResponseOffsetReceiver:]), true
	case t == TypeCookieReply && len(msg) == CookieReplySize:
		return binary.LittleEndian.Uint32(msg[CookieReplyOffsetReceiver:]), true
	case t == TypeTransport && len(msg) >= TransportMinSize:
		return binary.LittleEndian.Uint32(msg[TransportOffsetReceiver:]), true
	}
	return 0, false
}

// ConsumeResponse processes msg, a handshake response to the initiation
// this handshake sent (section 5.4.3), and enters StateResponseConsumed,
// after which DeriveKeys gives the session. MAC1 is verified first (no
// Curve25519 work for a bad one); the receiver index must be LocalIndex and
// the state StateInitiationCreated (else DropUnexpectedState, so a replayed
// or duplicated response is refused). Two Curve25519 operations. Errors are
// DropReasons, counted; on error the state is unchanged.
func (h *Handshake) ConsumeResponse(msg []byte) error {
	st := h.id.stats
	if len(msg) != ResponseSize {
		return st.drop(DropWrongSize)
	}
	if binary.LittleEndian.Uint32(msg) != TypeResponse {
		return st.drop(DropWrongType)
	}
	if !checkMAC1(&h.id.checker.mac1Key, msg, ResponseOffsetMAC1) {
		return st.drop(DropBadMAC1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	recv := binary.LittleEndian.Uint32(msg[ResponseOffsetReceiver:])
	if h.state != StateInitiationCreated ||
		subtle.ConstantTimeEq(int32(recv), int32(h.localIndex)) != 1 {
		return st.drop(DropUnexpectedState)
	}
	hash, ck := h.hash, h.chainKey
	var ss, key, tau [KeySize]byte
	defer clear(hash[:])
	defer clear(ck[:])
	defer clear(ss[:])
	defer clear(key[:])
	defer clear(tau[:])
	var epub PublicKey
	copy(epub[:], msg[ResponseOffsetEphemeral:ResponseOffsetEmpty])
	mixHash(&hash, &hash, epub[:])
	kdf1(&ck, ck[:], epub[:])
	if err := dh(&ss, h.ephemeral, &epub, st); err != nil {
		return st.drop(DropInvalidPublicKey)
	}
	kdf1(&ck, ck[:], ss[:])
	if err := dh(&ss, h.id.scalar, &epub, st); err != nil {
		return st.drop(DropInvalidPublicKey)
	}
	kdf1(&ck, ck[:], ss[:])
	kdf3(&ck, &tau, &key, ck[:], h.psk[:])
	mixHash(&hash, &hash, tau[:])
	aead, _ := chacha20poly1305.New(key[:])
	if _, err := aead.Open(nil, zeroNonce[:], msg[ResponseOffsetEmpty:ResponseOffsetMAC1], hash[:]); err != nil {
		return st.drop(DropDecryptFailed)
	}
	mixHash(&hash, &hash, msg[ResponseOffsetEmpty:ResponseOffsetMAC1])

	h.hash, h.chainKey = hash, ck
	h.remoteIndex = binary.LittleEndian.Uint32(msg[ResponseOffsetSender:])
	h.localEphemeral.Zero()
	h.ephemeral = nil
	h.state = StateResponseConsumed
	st.responsesConsumed.Add(1)
	return nil
}

// ConsumeCookieReply gives msg, a cookie reply whose receiver index the
// caller found to be this handshake's, to the peer's CookieGenerator (see
// CookieGenerator.ConsumeReply). The cookie is used from the next message we
// create: as wireguard-go and the kernel do, we do not resend at once; the
// retry timer (RekeyTimeout) resends.
func (h *Handshake) ConsumeCookieReply(msg []byte) error {
	return h.cookies.ConsumeReply(msg)
}

// DeriveKeys derives the session's transport keys from a completed exchange
// (section 5.4.5: (T_send, T_recv) = KDF2(C, empty) for the initiator,
// swapped for the responder), zeroes the handshake's chaining key, hash and
// ephemeral keys, and returns to StateZeroed. The local index moves to the
// returned Keys (the caller's index table maps it to the new keypair now).
// It needs StateResponseConsumed or StateResponseCreated (else ErrState).
func (h *Handshake) DeriveKeys() (Keys, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var k Keys
	switch h.state {
	case StateResponseConsumed:
		kdf2(&k.Send, &k.Receive, h.chainKey[:], nil)
		k.IsInitiator = true
	case StateResponseCreated:
		kdf2(&k.Receive, &k.Send, h.chainKey[:], nil)
	default:
		return Keys{}, fmt.Errorf("derive keys in state %v: %w", h.state, ErrState)
	}
	k.LocalIndex, k.RemoteIndex = h.localIndex, h.remoteIndex
	h.clearLocked()
	return k, nil
}
