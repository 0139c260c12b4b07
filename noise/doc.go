// Package noise implements the WireGuard handshake on byte slices: the
// handshake initiation (type 1), handshake response (type 2) and cookie reply
// (type 3) messages, MAC1/MAC2, the transport data header (type 4) and the
// derivation of a session's keys.
//
// The protocol is Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s (the Noise Protocol
// Framework, revision 34, pattern IK with a pre-shared key mixed in after the
// second message) with WireGuard's construction, identifier and labels, as
// specified in the WireGuard whitepaper (J. A. Donenfeld, "WireGuard: Next
// Generation Kernel Network Tunnel", revision e2da747, 2020), section 5.4,
// and as spoken on the wire by the Linux kernel and wireguard-go. Section
// numbers in this package's comments refer to that whitepaper.
//
// The package knows nothing of sockets, queues, peers' endpoints or timers:
// every function takes and returns bytes, and the caller (the control plane)
// sends what it gets back. It starts no goroutine. The clock is injected
// (NewStaticIdentity's clock argument) for the flood limit and the cookie
// lifetimes; the one exception is the TAI64N timestamp of a handshake
// initiation, which is wall time by definition (golang.zx2c4.com/wireguard/tai64n
// reads time.Now), because the responder compares it with its own record of
// the initiator's previous timestamps.
//
// # Roles
//
//   - StaticIdentity: the local static key pair and what is derived from it
//     (the MAC1 key and cookie key of messages sent to us), the responder's
//     CookieChecker and the drop counters. Immutable once made, except for its
//     counters and cookie secret; safe for concurrent use.
//   - Handshake: the state of one peer's handshake, in either role: create
//     and consume initiations and responses, consume cookie replies, derive
//     Keys. Holds the peer's CookieGenerator. Safe for concurrent use (one
//     mutex per peer).
//   - CookieChecker / CookieGenerator: the two halves of the cookie mechanism
//     (section 5.4.7): the responder checks MAC1 always and MAC2 when under
//     load, and answers with cookie replies; the initiator stamps MAC1 and
//     MAC2 on what it sends and takes in cookie replies.
//   - SourceLimiter: the per-source token bucket for handshake messages
//     (20 per second, burst 5), for the caller to apply under load.
//
// # A responder's receive path
//
//	v, err := id.CookieChecker().Check(msg, src, underLoad) // no Curve25519 yet
//	switch v {
//	case noise.VerdictDrop: // err says why; counted
//	case noise.VerdictCookie:
//		id.CookieChecker().CreateReply(&reply, msg, src) // send reply to src
//	case noise.VerdictAccept:
//		if underLoad && !limiter.Allow(src.Addr()) { break } // source proven by MAC2
//		h, err := id.ConsumeInitiation(msg, lookup)     // Curve25519 from here on
//		h.CreateResponse(&resp, newIndex)
//		keys, err := h.DeriveKeys()
//	}
//
// # Key material
//
// Every copy of key material this package holds (ephemeral keys, chaining
// keys, hashes, Diffie-Hellman results, cookie secrets) is overwritten with
// zeros when it is discarded. Two kinds of copies are out of our reach and
// are documented here rather than hidden: a cipher.AEAD built from a key
// (chacha20poly1305.New, used here for the handshake's own AEADs, and by a
// caller that seals transport data with Keys that way) keeps its own copy of the key, which cannot be zeroed and
// lives until the garbage collector reclaims it; and crypto/ecdh copies
// scalars and shared secrets into values it allocates itself: the
// identity's static key and each exchange's ephemeral key are held as
// *ecdh.PrivateKey for as long as they are in use (so that an X25519 costs
// one scalar multiplication, not the two of x/crypto's curve25519.X25519,
// which makes a new ecdh key, public key included, per call) and dropped
// for the garbage collector when the identity or exchange is zeroed. Keys returned by DeriveKeys are the caller's to
// zero (Keys.Zero) once the AEADs are built.
//
// # Errors and drops
//
// A message that fails any check is rejected with an error that is a
// DropReason (compare with errors.Is), and counted by reason in the
// identity's Stats. Nothing here panics on wire input.
package noise
