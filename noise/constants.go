package noise

import (
	"time"

	"github.com/wgpio/wgpio/protocol"
)

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

// Message types and sizes: aliases of package protocol's, which owns them
// (whitepaper section 5.4), for callers of this package's message
// functions.
const (
	TypeInitiation  = protocol.TypeInitiation
	TypeResponse    = protocol.TypeResponse
	TypeCookieReply = protocol.TypeCookieReply
	TypeTransport   = protocol.TypeTransport

	KeySize       = protocol.KeySize
	TagSize       = protocol.TagSize
	MACSize       = protocol.MACSize
	TimestampSize = protocol.TimestampSize

	InitiationSize      = protocol.InitiationSize
	ResponseSize        = protocol.ResponseSize
	CookieReplySize     = protocol.CookieReplySize
	TransportHeaderSize = protocol.TransportHeaderSize
	TransportMinSize    = protocol.TransportMinSize
	KeepaliveSize       = protocol.KeepaliveSize
	CookieNonceSize     = protocol.CookieNonceSize
	TransportNonceSize  = protocol.TransportNonceSize
	PaddingMultiple     = protocol.PaddingMultiple
	MaxHandshakeSize    = protocol.MaxHandshakeSize
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

// Field offsets of transport data (section 5.4.6): aliases of package
// protocol's.
const (
	TransportOffsetReceiver = protocol.TransportOffsetReceiver
	TransportOffsetCounter  = protocol.TransportOffsetCounter
	TransportOffsetContent  = protocol.TransportOffsetContent
)

// The limits and timers of whitepaper section 6.1 are package protocol's
// (protocol.RekeyAfterMessages, protocol.RejectAfterTime, ...).

// HandshakeInitiationRate is the minimum interval between two accepted
// handshake initiations from one peer: 1 s / 50 = 20 ms (wireguard-go
// HandshakeInitationRate; the kernel's INITIATIONS_PER_SECOND = 50). An
// implementation's choice, not the whitepaper's.
const HandshakeInitiationRate = time.Second / 50

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
