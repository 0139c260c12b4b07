package fastpath

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/chachapoly"
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
// any queue use it concurrently. The keys are held as chachapoly.Keys, which
// the workers seal and open with in bursts (package chachapoly); the
// keypair owns that key memory and erases it when retired (Engine.Retire,
// after the grace period in which a worker may still hold the keypair).
type Keypair struct {
	// The send line (bytes 0-63): all that a worker that encrypts for
	// the session reads and writes once per burst, nothing else (one
	// line per peer of a burst, not two: with traffic for thousands of
	// peers every line is a cache miss). sendNonce is the next counter to
	// reserve, the one word written by every queue that encrypts for
	// this session; the fields beside it are read by the same senders
	// only (receivers never touch this line), and are the senders' copies
	// of what the state line holds for receivers.
	sendNonce atomic.Uint64
	// RemoteIndex is the peer's receiver index, written into what we
	// send.
	RemoteIndex uint32
	// sendFlags: sendExhausted, set once a reservation reached
	// RejectAfterMessages (ReserveNonces then hands out nothing without
	// touching sendNonce), the senders' copies of confirmed
	// (sendConfirmed) and dead (sendDead), set with them, and
	// sendExpired (ExpireSend: sends no more, still receives).
	sendFlags atomic.Uint32
	// serial tells keypairs apart for as long as the process runs (never
	// 0, never reused, unlike an address or a receiver index): a worker's
	// lease of send counters names its keypair by it (outbound.go, lease),
	// so that it keeps no pointer to it past a burst.
	serial uint64
	// sendUntil is Created + Reject-After-Time: the keypair sends before
	// it (whitepaper §6.2).
	sendUntil int64
	// send is the send key; its key words end the send line, its
	// x/crypto AEAD (long messages only) opens the state line.
	send chachapoly.Key

	// The state line (bytes 72-127, after send's end): read by receivers
	// once per burst, written once in a session's life.

	// Created is when the handshake completed, in ns of the control plane's
	// clock (monotonic). Set by NewKeypair and never changed after:
	// sendUntil copies it for the senders.
	Created int64
	// confirmed is set once the responder has received data on this keypair
	// (whitepaper §5.4.6: the responder must not send before).
	confirmed atomic.Bool
	dead      atomic.Bool
	// LocalIndex is our receiver index: peers put it in transport data
	// they send us.
	LocalIndex uint32
	// IsInitiator: we sent the handshake initiation for this session.
	IsInitiator bool
	// Peer is the peer the session belongs to.
	Peer *Peer
	// replay is allocated apart, by the first worker that checks a counter
	// (window): a keypair nothing is received on (an initiator's session
	// before the reply, a responder's Next never used) carries none, and
	// the window's policy is the engine's. It stays out of the struct,
	// which it would grow by 1 KiB or more.
	replay atomic.Pointer[replay.SharedWindow]
	// received is set when data arrives on an unconfirmed keypair that is
	// not in Next (a responder's moved to Previous by Peer.Rotate, never
	// sent with): the initiator used it, though it is never confirmed.
	received atomic.Bool
	_        [12]byte // to the receive line (the send Key's AEAD pointer ends at 72)

	// The receive line (bytes 128-191): the key receivers open with.
	receive chachapoly.Key
	_       [keypairPad]byte
}

// The bits of Keypair.sendFlags.
const (
	sendExhausted = 1 << iota
	sendConfirmed
	sendDead
	sendExpired
)

// keypairSerials numbers the keypairs NewKeypair makes (Keypair.serial).
var keypairSerials atomic.Uint64

// A Keypair fills three cache lines: the allocator's size class of 192
// bytes places every object on a 64-byte boundary (its spans are
// page-aligned), so the three lines above are the object's own
// (TestKeypairLayout checks it). Workers that send for 10,000 peers a
// second touch one line of each keypair (the send line; the AEAD pointer
// in the state line only for messages too long for the SIMD lanes), which
// they load for a whole burst at once (outbound.go, warm).
const (
	keypairSize = 192
	keypairPad  = 64 - 40 // the receive line after its chachapoly.Key (40 bytes)
)

// NewKeypair builds a keypair from the two 32-byte transport keys. The keys
// are copied (expanded) into the keypair; the caller zeroes its copies. The
// error is always nil today (kept for key types that can fail). peer must
// be in the engine's set before the keypair is published (IndexTable) or
// put in its slots: the workers that use it index their per-peer state by
// peer's ID (see ControlPacket.Peer).
func NewKeypair(sendKey, receiveKey *[32]byte, localIndex, remoteIndex uint32, initiator bool, created int64, peer *Peer) (*Keypair, error) {
	kp := &Keypair{
		serial:      keypairSerials.Add(1),
		LocalIndex:  localIndex,
		RemoteIndex: remoteIndex,
		IsInitiator: initiator,
		Created:     created,
		sendUntil:   created + rejectAfterTimeNs,
		Peer:        peer,
	}
	kp.send.Set(sendKey)
	kp.receive.Set(receiveKey)
	// An initiator's keypair is confirmed by the handshake response it
	// consumed; a responder's by the first transport data it receives.
	if initiator {
		kp.confirm()
	}
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
	if kp.sendFlags.Load()&sendExhausted != 0 {
		return protocol.RejectAfterMessages, 0
	}
	end := kp.sendNonce.Add(uint64(n))
	first = end - uint64(n)
	if end < protocol.RejectAfterMessages && end >= first {
		return first, n // the common path
	}
	kp.sendFlags.Or(sendExhausted)
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

// Used reports whether the peer sent on a responder's keypair: data
// arrived on it in Next, which confirmed it (Confirmed), or in Previous,
// where Peer.Rotate moves it when our own exchange completed first and
// it is never confirmed. A responder's keypair retired unused is the only
// sign of a preshared key mismatch on this side. An initiator's keypair
// is confirmed, so used, from the start.
func (kp *Keypair) Used() bool { return kp.confirmed.Load() || kp.received.Load() }

// confirm marks the keypair confirmed, for receivers and senders (before it
// is made a peer's Current, so that a sender that finds it there sees it
// confirmed).
func (kp *Keypair) confirm() {
	kp.sendFlags.Or(sendConfirmed)
	kp.confirmed.Store(true)
}

// canSend is what sendable asks of a keypair, from its send line alone:
// confirmed, not dead, not expired, and younger than Reject-After-Time at
// now.
func (kp *Keypair) canSend(now int64) bool {
	return kp.sendFlags.Load()&(sendConfirmed|sendDead|sendExpired) == sendConfirmed && now < kp.sendUntil
}

// ExpireSend makes the keypair send no more while it goes on receiving
// until it expires or is retired, as the device's private key changes:
// the kernel's wg_noise_expire_current_peer_keypairs (sending.is_valid =
// false) and wireguard-go's Peer.ExpireCurrentKeypairs (its send counter
// set to Reject-After-Messages) do the same. The workers then hold what
// they have for the peer and ask for a handshake (HandshakeNeeded), and
// SendCounter reads RejectAfterMessages, so that the control plane sees
// no session to send on. Safe for concurrent use; a reservation of a
// worker that passed canSend before gets nothing (ReserveNonces).
func (kp *Keypair) ExpireSend() {
	kp.sendFlags.Or(sendExpired | sendExhausted)
	kp.sendNonce.Store(protocol.RejectAfterMessages)
}

// Seal encrypts the plaintext p into dst[:len(dst)+len(p)+16] with counter c
// (whitepaper §5.4.6: nonce = 32 zero bits ‖ little-endian 64-bit counter)
// and returns it; dst may be p[:0] (in place, with 16 bytes of capacity
// after p) or not overlap p. It seals one message: the workers seal bursts
// with chachapoly.Seal. A dead keypair (Dead: killed, its keys erased or
// about to be) seals nothing and returns nil: its erased key would seal
// under the all-zero key.
func (kp *Keypair) Seal(dst, p []byte, c uint64) []byte {
	if kp.Dead() {
		return nil
	}
	n := len(dst)
	out := append(dst, p...)
	out = append(out, zeroTag[:]...)
	pk := [1]chachapoly.Packet{{Key: &kp.send, Counter: c, Data: out[n:]}}
	chachapoly.Seal(pk[:])
	return out
}

var zeroTag [chachapoly.TagSize]byte

// Open authenticates and decrypts ct (ciphertext ‖ 16-byte tag) in place
// and returns the plaintext (a prefix of ct), or ok = false (and the
// plaintext area zeroed). It opens one message: the workers open bursts
// with chachapoly.Open. A dead keypair (Dead) opens nothing: ok = false,
// ct untouched.
func (kp *Keypair) Open(ct []byte, c uint64) (p []byte, ok bool) {
	if len(ct) < chachapoly.TagSize || kp.Dead() {
		return nil, false
	}
	pk := [1]chachapoly.Packet{{Key: &kp.receive, Counter: c, Data: ct}}
	var res [1]bool
	chachapoly.Open(pk[:], res[:])
	return ct[:len(ct)-chachapoly.TagSize], res[0]
}

// CheckReplay runs the replay window over counters of packets that were
// authenticated with this keypair, once per batch (see package replay: only
// authenticated counters may move the window). accepted[i] reports
// counters[i], and it returns how many were accepted; accepted must be at
// least as long as counters (replay.Window.CheckBatch). The window is
// replay.Auto, told no queue; the engine's workers check with their queue
// and the engine's policy.
func (kp *Keypair) CheckReplay(counters []uint64, accepted []bool) int {
	w, _ := kp.window(replay.Auto)
	return w.CheckBatch(counters, protocol.RejectAfterMessages, accepted)
}

// checkReplay is CheckReplay for the worker of queue, whose engine's policy
// is p (used if this call makes the window); widened reports that this call
// widened the window, or made it wide from the start (newWindow).
func (kp *Keypair) checkReplay(queue int, p replay.Policy, counters []uint64, accepted []bool) (n int, widened bool) {
	w, wide := kp.window(p)
	n, widened = w.CheckBatchFrom(queue, counters, protocol.RejectAfterMessages, accepted)
	return n, widened || wide
}

// checkReplayOne is checkReplay for the one counter c.
func (kp *Keypair) checkReplayOne(queue int, p replay.Policy, c uint64) (ok, widened bool) {
	w, wide := kp.window(p)
	ok, widened = w.CheckFrom(queue, c, protocol.RejectAfterMessages)
	return ok, widened || wide
}

// window returns the keypair's replay window, making it with policy p if
// it has none (newWindow; wide reports an Auto window it made wide).
func (kp *Keypair) window(p replay.Policy) (w *replay.SharedWindow, wide bool) {
	if w := kp.replay.Load(); w != nil {
		return w, false
	}
	return kp.newWindow(p)
}

// newWindow makes the keypair's replay window with policy p, once per
// keypair, by whichever worker gets there first (wide reports that this
// call made an Auto window wide). An Auto window starts wide when the
// peer's session before it (peerNeededWide) needed its width
// (replay.Window.Needed): its queues lag each other by more than the
// narrow window, and this session's first packets from the lagging queue
// would come too old for a narrow window, rejected, and a rejected
// counter never widens it: every session after the first would lose
// them. A peer whose window widened for a move to another queue alone,
// or for reordering within the narrow window, starts narrow again.
func (kp *Keypair) newWindow(p replay.Policy) (w *replay.SharedWindow, wide bool) {
	w = new(replay.SharedWindow)
	if p == replay.Auto && kp.peerNeededWide() {
		w.SetPolicy(replay.Wide)
		wide = true
	} else if p != replay.Auto {
		w.SetPolicy(p)
	}
	if kp.replay.CompareAndSwap(nil, w) {
		return w, wide
	}
	return kp.replay.Load(), false
}

// peerNeededWide reports whether the window of the peer's session before
// kp needed its width (replay.Window.Needed): Current, while kp is a new
// responder session waiting in Next, else Previous (kp is Current, or was
// rotated in since). Only that one: a session two back that lagged does
// not make the next two start wide.
func (kp *Keypair) peerNeededWide() bool {
	p := kp.Peer
	if p == nil {
		return false
	}
	o := p.Current.Load()
	if o == kp {
		o = p.Previous.Load()
	}
	if o == nil || o == kp {
		return false
	}
	w := o.replay.Load()
	return w != nil && w.Needed()
}

// ReplayWide reports whether the keypair's replay window is wide (131,008
// counters): replay.Wide, or replay.Auto once widened. False while it has
// no window.
func (kp *Keypair) ReplayWide() bool {
	w := kp.replay.Load()
	return w != nil && w.Wide()
}

// Zero marks the keypair dead (Dead reports true, workers stop using it),
// clears the replay window and erases both keys (chachapoly.Key.Zero): the
// session is discarded (whitepaper §6.3). No worker may be using the keypair
// any more: a control plane running an Engine calls Engine.Retire instead,
// which marks the keypair dead at once and calls Zero after the grace period
// in which a worker may still be in a batch that loaded it. Zero suits a
// keypair no worker ever saw (or a stopped engine's).
func (kp *Keypair) Zero() {
	kp.kill()
	if w := kp.replay.Load(); w != nil {
		w.Reset()
	}
	kp.send.Zero()
	kp.receive.Zero()
}

// kill marks the keypair dead, leaving the keys and the replay window to a
// later Zero (Engine.Retire). The window stays whole until then: a worker
// that opened a burst with the keypair before it died still checks the
// burst's counters against it, and an emptied window would deliver a
// replayed message of that burst a second time (whitepaper §5.4.6).
func (kp *Keypair) kill() {
	kp.dead.Store(true)
	kp.sendFlags.Or(sendDead)
}

// Dead reports whether the keypair was retired or zeroed: workers no longer
// seal or open with it.
func (kp *Keypair) Dead() bool { return kp.dead.Load() }
