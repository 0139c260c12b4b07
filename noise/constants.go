package noise

import "time"

// Protocol strings (whitepaper section 5.4).
const (
	// Construction names the Noise protocol; its BLAKE2s hash is the initial
	// chaining key (section 5.4.2).
	Construction = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
	// Identifier is mixed into the initial hash (section 5.4.2).
	Identifier = "WireGuard v1 zx2c4 Jason@zx2c4.com"
	// LabelMAC1 prefixes the responder's public key to form the MAC1 key
	// (section 5.4.4).
	LabelMAC1 = "mac1----"
	// LabelCookie prefixes the responder's public key to form the key that
	// encrypts cookie replies (section 5.4.7).
	LabelCookie = "cookie--"
)

// Message types: the first byte of every message, followed by three zero
// bytes (section 5.4). wireguard-go and the kernel read the first four bytes
// as one little-endian uint32, so nonzero reserved bytes make a message of
// no known type.
const (
	TypeInitiation  = 1
	TypeResponse    = 2
	TypeCookieReply = 3
	TypeTransport   = 4
)

// Sizes in bytes (section 5.4).
const (
	KeySize       = 32 // Curve25519 keys, pre-shared keys, chaining keys, hashes
	TagSize       = 16 // Poly1305 authentication tag
	MACSize       = 16 // MAC1, MAC2 and cookies: BLAKE2s with 16-byte output
	TimestampSize = 12 // TAI64N

	InitiationSize       = 148 // handshake initiation (section 5.4.2)
	ResponseSize         = 92  // handshake response (section 5.4.3)
	CookieReplySize      = 64  // cookie reply (section 5.4.7)
	TransportHeaderSize  = 16  // type, receiver index and counter of transport data
	TransportMinSize     = TransportHeaderSize + TagSize
	KeepaliveSize        = TransportMinSize // a keepalive carries no plaintext
	CookieNonceSize      = 24               // XChaCha20-Poly1305 nonce of a cookie reply
	TransportNonceSize   = 12               // ChaCha20-Poly1305 nonce of transport data
	PaddingMultiple      = 16               // transport plaintext is padded to a multiple of this (section 5.4.6)
	MaxHandshakeSize     = InitiationSize   // largest handshake message
	initiationMAC1Offset = InitiationSize - 2*MACSize
	responseMAC1Offset   = ResponseSize - 2*MACSize
)

// Field offsets of the handshake initiation (section 5.4.2).
const (
	InitiationOffsetSender    = 4
	InitiationOffsetEphemeral = 8
	InitiationOffsetStatic    = 40  // encrypted static public key, 32+16 bytes
	InitiationOffsetTimestamp = 88  // encrypted TAI64N, 12+16 bytes
	InitiationOffsetMAC1      = 116 // MAC1, 16 bytes
	InitiationOffsetMAC2      = 132 // MAC2, 16 bytes
)

// Field offsets of the handshake response (section 5.4.3).
const (
	ResponseOffsetSender    = 4
	ResponseOffsetReceiver  = 8
	ResponseOffsetEphemeral = 12
	ResponseOffsetEmpty     = 44 // encrypted empty plaintext: a 16-byte tag
	ResponseOffsetMAC1      = 60
	ResponseOffsetMAC2      = 76
)

// Field offsets of the cookie reply (section 5.4.7).
const (
	CookieReplyOffsetReceiver = 4
	CookieReplyOffsetNonce    = 8
	CookieReplyOffsetCookie   = 32 // encrypted cookie, 16+16 bytes
)

// Field offsets of transport data (section 5.4.6).
const (
	TransportOffsetReceiver = 4
	TransportOffsetCounter  = 8 // 64-bit little-endian
	TransportOffsetContent  = 16
)

// Protocol constants (whitepaper section 6.1; wireguard-go device/constants.go).
const (
	RekeyAfterMessages  uint64 = 1 << 60
	RejectAfterMessages uint64 = 1<<64 - 1<<13 - 1
	RekeyAfterTime             = 120 * time.Second
	RejectAfterTime            = 180 * time.Second
	RekeyAttemptTime           = 90 * time.Second
	RekeyTimeout               = 5 * time.Second
	// RekeyTimeoutJitterMax is the largest random delay added to each
	// handshake retry (section 6.1: "up to 333 ms"; wireguard-go draws from
	// [0, 334) ms).
	RekeyTimeoutJitterMax = 334 * time.Millisecond
	// MaxHandshakeAttempts is RekeyAttemptTime / RekeyTimeout.
	MaxHandshakeAttempts = int(RekeyAttemptTime / RekeyTimeout)
	KeepaliveTimeout     = 10 * time.Second
	// CookieRefreshTime is the lifetime of the responder's cookie secret and
	// of a cookie (section 5.4.7).
	CookieRefreshTime = 120 * time.Second
	// HandshakeInitiationRate is the minimum interval between two accepted
	// handshake initiations from one peer: 1 s / 50 = 20 ms (wireguard-go
	// HandshakeInitationRate; the kernel's INITIATIONS_PER_SECOND = 50).
	HandshakeInitiationRate = time.Second / 50
)

// Implementation constants: choices, not protocol.
const (
	// CookieLatency is taken off a cookie's lifetime on the initiator side,
	// so that a cookie minted near the end of the responder's secret's life
	// is not used after the secret rotated (the Linux kernel's
	// COOKIE_SECRET_LATENCY, drivers/net/wireguard/cookie.c; wireguard-go
	// keeps cookies the full CookieRefreshTime).
	CookieLatency = 5 * time.Second
	// UnderLoadAfterTime is how long a responder stays under load after the
	// condition that put it there ended (wireguard-go UnderLoadAfterTime, the
	// kernel's 1 s in receive.c). The caller decides "under load" (its
	// handshake queue at least 1/8 full, held for this long) and passes it to
	// CookieChecker.Check.
	UnderLoadAfterTime = time.Second
)
