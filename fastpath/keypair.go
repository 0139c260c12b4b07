package fastpath

import (
	"crypto/cipher"
	"fmt"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/protocol"
	"github.com/wgpio/wgpio/replay"
)

// Keypair is one session's transport keys, as derived by a handshake
// (whitepaper §5.4.5), plus the state the fast path keeps per session: the
// send counter and the replay window.
//
// A Keypair is created by the control plane and is immutable afterwards but
// for the send counter (reserved in ranges with one atomic add) and the
// replay window (shared by every queue, locked once per batch). Workers on
// any queue use it concurrently. The AEADs keep their own copies of the keys,
// which Go gives no way to zero: Zero marks the keypair dead and clears the
// replay window, and the AEADs (with their key copies) live until the last
// reference to the keypair is dropped.
type Keypair struct {
	// sendNonce is the next counter to reserve: the one cache line written
	// by every queue that encrypts for this session. The allocator does
	// not align the struct to a cache line, so a line of padding on each
	// side keeps other fields (and the neighbouring object) off it.
	_         [64]byte
	sendNonce atomic.Uint64
	_         [56]byte

	send, receive cipher.AEAD

	// LocalIndex is our receiver index: peers put it in transport data
	// they send us. RemoteIndex is theirs, written into what we send.
	LocalIndex, RemoteIndex uint32
	// IsInitiator: we sent the handshake initiation for this session.
	IsInitiator bool
	// Created is when the handshake completed, in ns of the control plane's
	// clock (monotonic).
	Created int64
	// Peer is the peer the session belongs to.
	Peer *Peer

	// confirmed is set once the responder has received data on this keypair
	// (whitepaper §5.4.6: the responder must not send before).
	confirmed atomic.Bool
	dead      atomic.Bool
	// exhausted is set once a reservation reached RejectAfterMessages:
	// ReserveNonces then hands out nothing without touching sendNonce.
	exhausted atomic.Bool

	// replay is allocated apart: a 16 KiB window inside the struct would
	// space keypairs 16 KiB apart, so that the hot fields of many peers'
	// keypairs fall into the same few cache sets and each on its own page.
	replay *replay.SharedWindow
}

// NewKeypair builds a keypair from the two 32-byte transport keys. The keys
// are copied into the AEADs; the caller zeroes its copies.
func NewKeypair(sendKey, receiveKey *[32]byte, localIndex, remoteIndex uint32, initiator bool, created int64, peer *Peer) (*Keypair, error) {
	s, err := chacha20poly1305.New(sendKey[:])
	if err != nil {
		return nil, fmt.Errorf("create send AEAD: %w", err)
	}
	r, err := chacha20poly1305.New(receiveKey[:])
	if err != nil {
		return nil, fmt.Errorf("create receive AEAD: %w", err)
	}
	kp := &Keypair{
		send:        s,
		receive:     r,
		LocalIndex:  localIndex,
		RemoteIndex: remoteIndex,
		IsInitiator: initiator,
		Created:     created,
		Peer:        peer,
		replay:      new(replay.SharedWindow),
	}
	// An initiator's keypair is confirmed by the handshake response it
	// consumed; a responder's by the first transport data it receives.
	kp.confirmed.Store(initiator)
	return kp, nil
}

// ReserveNonces reserves n consecutive send counters and returns the first
// and how many of the n may be used (fewer, or 0, when the range reaches
// [protocol.RejectAfterMessages], whitepaper §6.1). No counter is ever handed out twice.
// Safe for concurrent use; n must be at least 1.
//
// The common path is one atomic load of the exhausted flag and one atomic
// add, no compare-and-swap. The call whose range reaches the limit sets the
// flag and puts the counter back to RejectAfterMessages (as the kernel's
// send path does), so later calls return 0 before adding. Only calls that
// loaded the flag before it was set can still add; the counter could wrap
// past 2^64 (and hand out small counters again) only if such calls added more
// than the 2^13+1 counters between RejectAfterMessages and 2^64 before any of
// them stored the counter back, at least 128 calls of the default burst of 64
// stalled between two adjacent instructions at once.
func (kp *Keypair) ReserveNonces(n int) (first uint64, granted int) {
	if kp.exhausted.Load() {
		return protocol.RejectAfterMessages, 0
	}
	end := kp.sendNonce.Add(uint64(n))
	first = end - uint64(n)
	if end < protocol.RejectAfterMessages && end >= first {
		return first, n // the common path
	}
	kp.exhausted.Store(true)
	kp.sendNonce.Store(protocol.RejectAfterMessages)
	if end < first || first >= protocol.RejectAfterMessages { // wrapped or already past
		return protocol.RejectAfterMessages, 0
	}
	return first, int(protocol.RejectAfterMessages - first)
}

// SendCounter is the next counter ReserveNonces would hand out (the number
// of messages sent or reserved so far).
func (kp *Keypair) SendCounter() uint64 { return kp.sendNonce.Load() }

// Confirmed reports whether the session may be used to send (always for the
// initiator; for the responder once data arrived on it).
func (kp *Keypair) Confirmed() bool { return kp.confirmed.Load() }

// Seal encrypts the plaintext p in place into dst[:len(p)+16] with counter c
// (whitepaper §5.4.6: nonce = 32 zero bits ‖ little-endian 64-bit counter).
// dst must be p[:0] or not overlap p. nonce is a 12-byte scratch buffer owned
// by the caller (it must not escape to the heap per packet).
func (kp *Keypair) Seal(dst, p []byte, c uint64, nonce *[12]byte) []byte {
	putNonce(nonce, c)
	return kp.send.Seal(dst, nonce[:], p, nil)
}

// Open authenticates and decrypts ct (ciphertext ‖ 16-byte tag) in place
// and returns the plaintext (a prefix of ct), or ok = false.
func (kp *Keypair) Open(ct []byte, c uint64, nonce *[12]byte) (p []byte, ok bool) {
	putNonce(nonce, c)
	p, err := kp.receive.Open(ct[:0], nonce[:], ct, nil)
	return p, err == nil
}

func putNonce(nonce *[12]byte, c uint64) {
	nonce[0], nonce[1], nonce[2], nonce[3] = 0, 0, 0, 0
	nonce[4] = byte(c)
	nonce[5] = byte(c >> 8)
	nonce[6] = byte(c >> 16)
	nonce[7] = byte(c >> 24)
	nonce[8] = byte(c >> 32)
	nonce[9] = byte(c >> 40)
	nonce[10] = byte(c >> 48)
	nonce[11] = byte(c >> 56)
}

// CheckReplay runs the replay window over counters of packets that were
// authenticated with this keypair, once per batch (see package replay: only
// authenticated counters may move the window). accepted[i] reports counters[i].
func (kp *Keypair) CheckReplay(counters []uint64, accepted []bool) int {
	return kp.replay.CheckBatch(counters, protocol.RejectAfterMessages, accepted)
}

// Zero marks the keypair dead (Dead reports true, workers stop using it)
// and clears the replay window. It does not touch the AEADs, which workers
// may still be using for a batch they loaded the keypair for: the Go AEAD
// keeps its own copy of the key in unexported memory that cannot be zeroed,
// and that copy lives until the last reference is dropped. The control plane
// calls Zero after it has unpublished the keypair from its peer and the
// index table (whitepaper §6.3, zeroing after RejectAfterTime × 3).
func (kp *Keypair) Zero() {
	kp.dead.Store(true)
	kp.replay.Reset()
}

// Dead reports whether Zero was called.
func (kp *Keypair) Dead() bool { return kp.dead.Load() }
