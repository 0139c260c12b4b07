package protocol

import "time"

// Message types: the first byte of every message, followed by three zero
// bytes (section 5.4). wireguard-go and the kernel read the first four bytes
// as one little-endian uint32, so a message with nonzero reserved bytes is
// of no known type.
const (
	TypeInitiation  = 1 // handshake initiation (section 5.4.2)
	TypeResponse    = 2 // handshake response (section 5.4.3)
	TypeCookieReply = 3 // cookie reply (section 5.4.7)
	TypeTransport   = 4 // transport data (section 5.4.6)
)

// Sizes in bytes (section 5.4).
const (
	KeySize       = 32 // Curve25519 keys, pre-shared keys, chaining keys, hashes
	TagSize       = 16 // Poly1305 authentication tag
	MACSize       = 16 // MAC1, MAC2 and cookies: BLAKE2s with 16-byte output
	TimestampSize = 12 // TAI64N

	InitiationSize      = 148 // handshake initiation (section 5.4.2)
	ResponseSize        = 92  // handshake response (section 5.4.3)
	CookieReplySize     = 64  // cookie reply (section 5.4.7)
	TransportHeaderSize = 16  // type, receiver index and counter of transport data (section 5.4.6)
	TransportMinSize    = TransportHeaderSize + TagSize
	KeepaliveSize       = TransportMinSize // a keepalive carries no plaintext (section 6.5)
	CookieNonceSize     = 24               // XChaCha20-Poly1305 nonce of a cookie reply (section 5.4.7)
	TransportNonceSize  = 12               // ChaCha20-Poly1305 nonce of transport data (section 5.4.6)
	PaddingMultiple     = 16               // transport plaintext is padded to a multiple of this (section 5.4.6)
	MaxHandshakeSize    = InitiationSize   // largest handshake message
)

// Field offsets of transport data (section 5.4.6): type(1) reserved(3)
// receiver(4) counter(8), then the encrypted, padded packet and its tag.
const (
	TransportOffsetReceiver = 4  // receiver index, 32-bit little-endian
	TransportOffsetCounter  = 8  // 64-bit little-endian
	TransportOffsetContent  = 16 // encrypted packet
)

// Limits on one keypair's messages (section 6.1; applied as section 6.2
// says).
const (
	// RekeyAfterMessages: once a keypair has sent this many messages, its
	// sender starts a new handshake.
	RekeyAfterMessages uint64 = 1 << 60
	// RejectAfterMessages: no message is sent or accepted with a counter at
	// or past this: 2^64 - 2^13 - 1 (the 2^13 leaves room for the replay
	// window of the kernel implementation).
	RejectAfterMessages uint64 = 1<<64 - 1<<13 - 1
)

// Timers (section 6.1; the rules that use them are sections 6.2 to 6.5).
const (
	// RekeyAfterTime: the initiator of a session starts a new handshake
	// when it sends on a session this old (section 6.2).
	RekeyAfterTime = 120 * time.Second
	// RejectAfterTime: a session this old is no longer used to send or
	// accept data (section 6.2).
	RejectAfterTime = 180 * time.Second
	// RekeyAttemptTime: an initiator gives up retrying a handshake after
	// this long (section 6.4).
	RekeyAttemptTime = 90 * time.Second
	// RekeyTimeout: a handshake initiation not answered within this is
	// retried (section 6.4).
	RekeyTimeout = 5 * time.Second
	// RekeyTimeoutJitterMax is the largest random delay added to each
	// handshake retry (section 6.4: "up to 333 ms"; wireguard-go draws from
	// [0, 334) ms).
	RekeyTimeoutJitterMax = 334 * time.Millisecond
	// MaxHandshakeAttempts is RekeyAttemptTime / RekeyTimeout.
	MaxHandshakeAttempts = int(RekeyAttemptTime / RekeyTimeout)
	// KeepaliveTimeout: a peer that received data and sent nothing for this
	// long sends a keepalive (section 6.5).
	KeepaliveTimeout = 10 * time.Second
	// CookieRefreshTime is the lifetime of the responder's cookie secret and
	// of a cookie (section 5.4.7).
	CookieRefreshTime = 120 * time.Second
)
