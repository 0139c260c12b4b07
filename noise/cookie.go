package noise

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/protocol"
)

// Verdict is what CookieChecker.Check decides for a handshake message.
type Verdict uint8

// Verdicts of CookieChecker.Check.
const (
	// VerdictDrop: drop the message silently; the error says why.
	VerdictDrop Verdict = iota
	// VerdictCookie: do not process the message; answer the source with a
	// cookie reply (CreateReply).
	VerdictCookie
	// VerdictAccept: go on with ConsumeInitiation or ConsumeResponse.
	VerdictAccept
)

// String returns "drop", "cookie" or "accept".
func (v Verdict) String() string {
	switch v {
	case VerdictDrop:
		return "drop"
	case VerdictCookie:
		return "cookie"
	case VerdictAccept:
		return "accept"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// CookieChecker is the responder's half of the cookie mechanism (section
// 5.4.7): it verifies MAC1 of every handshake message sent to us, verifies
// MAC2 when under load, and makes cookie replies. The cookie secret is
// random, made on first use and remade when older than [protocol.CookieRefreshTime]
// (2 minutes) on the identity's clock. Get one from
// StaticIdentity.CookieChecker; safe for concurrent use.
type CookieChecker struct {
	cookieKeys // of our public key

	mu        sync.RWMutex
	secret    [KeySize]byte // guarded by mu
	secretSet time.Time     // guarded by mu
	hasSecret bool          // guarded by mu
}

// cookieKeys are what one public key gives both halves of the cookie
// mechanism (sections 5.4.4, 5.4.7), with the identity's clock and
// counters; immutable after init.
type cookieKeys struct {
	mac1Key   [KeySize]byte // HASH(LabelMAC1 || public key)
	cookieKey [KeySize]byte // HASH(LabelCookie || public key)
	clock     func() time.Time
	stats     *Stats
}

func (k *cookieKeys) init(pub *PublicKey, clock func() time.Time, st *Stats) {
	k.mac1Key = labelKey(LabelMAC1, pub)
	k.cookieKey = labelKey(LabelCookie, pub)
	k.clock = clock
	k.stats = st
}

func (c *CookieChecker) zero() {
	c.mu.Lock()
	clear(c.secret[:])
	c.hasSecret = false
	c.mu.Unlock()
}

// macOffsets returns the offsets of MAC1 and MAC2 in a handshake message of
// its type and size, or a DropReason.
func macOffsets(msg []byte) (mac1 int, err error) {
	switch len(msg) {
	case InitiationSize:
		if binary.LittleEndian.Uint32(msg) != TypeInitiation {
			return 0, DropWrongType
		}
		return InitiationOffsetMAC1, nil
	case ResponseSize:
		if binary.LittleEndian.Uint32(msg) != TypeResponse {
			return 0, DropWrongType
		}
		return ResponseOffsetMAC1, nil
	}
	return 0, DropWrongSize
}

// CheckMAC1 reports whether msg, a handshake initiation or response, carries
// a valid MAC1 = MAC(HASH(LabelMAC1 || our public key), msg up to MAC1)
// (section 5.4.4). It does no Curve25519 work and does not count.
func (c *CookieChecker) CheckMAC1(msg []byte) bool {
	off, err := macOffsets(msg)
	if err != nil {
		return false
	}
	return checkMAC1(&c.mac1Key, msg, off)
}

func checkMAC1(key *[KeySize]byte, msg []byte, off int) bool {
	var m [MACSize]byte
	mac(&m, key[:], msg[:off])
	return subtle.ConstantTimeCompare(m[:], msg[off:off+MACSize]) == 1
}

// cookieFor sets cookie = MAC(secret, source address || port): the cookie
// binds the initiator's address and UDP port (section 5.4.7). c.mu held.
func (c *CookieChecker) cookieFor(cookie *[MACSize]byte, src netip.AddrPort) {
	var buf [18]byte
	a := src.Addr().Unmap()
	n := 4
	if a.Is4() {
		a4 := a.As4()
		copy(buf[:], a4[:])
	} else {
		a16 := a.As16()
		copy(buf[:], a16[:])
		n = 16
	}
	binary.BigEndian.PutUint16(buf[n:], src.Port())
	mac(cookie, c.secret[:], buf[:n+2])
}

// CheckMAC2 reports whether msg, a handshake initiation or response whose
// MAC1 was already verified, carries MAC2 = MAC(cookie, msg up to MAC2) for
// the cookie this checker would give src now. A secret older than
// [protocol.CookieRefreshTime] validates nothing.
func (c *CookieChecker) CheckMAC2(msg []byte, src netip.AddrPort) bool {
	off, err := macOffsets(msg)
	if err != nil {
		return false
	}
	off += MACSize
	var cookie, m [MACSize]byte
	c.mu.RLock()
	if !c.hasSecret || c.clock().Sub(c.secretSet) > protocol.CookieRefreshTime {
		c.mu.RUnlock()
		return false
	}
	c.cookieFor(&cookie, src)
	c.mu.RUnlock()
	mac(&m, cookie[:], msg[:off])
	clear(cookie[:])
	return subtle.ConstantTimeCompare(m[:], msg[off:off+MACSize]) == 1
}

// Check decides what to do with a handshake initiation or response msg
// received from src, before any Curve25519 work (section 5.4.7; the Linux
// kernel's wg_cookie_validate_packet):
//
//   - wrong size or type, or bad MAC1: VerdictDrop, counted, always;
//   - not under load: VerdictAccept;
//   - under load with a valid MAC2 for src: VerdictAccept;
//   - under load otherwise: VerdictCookie (counted as DropCookieRequired);
//     the caller answers with CreateReply (and should rate-limit those per
//     source).
//
// underLoad is the caller's: wireguard-go and the kernel are under load while
// their queue of received handshake messages is at least 1/8 full, and stay
// so for UnderLoadAfterTime (1 s) after it drains below that. msg is only
// read and not kept.
func (c *CookieChecker) Check(msg []byte, src netip.AddrPort, underLoad bool) (Verdict, error) {
	off, err := macOffsets(msg)
	if err != nil {
		return VerdictDrop, c.stats.drop(err.(DropReason))
	}
	if !checkMAC1(&c.mac1Key, msg, off) {
		return VerdictDrop, c.stats.drop(DropBadMAC1)
	}
	if !underLoad || c.CheckMAC2(msg, src) {
		return VerdictAccept, nil
	}
	return VerdictCookie, c.stats.drop(DropCookieRequired)
}

// CreateReply writes into dst the cookie reply to msg, a handshake
// initiation or response from src (section 5.4.7): receiver = msg's sender
// index, a random 24-byte nonce, and the cookie for src encrypted with
// XChaCha20-Poly1305 under HASH(LabelCookie || our public key), with msg's
// MAC1 as associated data. It renews the cookie secret when older than
// [protocol.CookieRefreshTime]. msg must have passed Check; an error means nothing was
// written that should be sent.
func (c *CookieChecker) CreateReply(dst *[CookieReplySize]byte, msg []byte, src netip.AddrPort) error {
	off, err := macOffsets(msg)
	if err != nil {
		return err
	}
	var cookie [MACSize]byte
	c.mu.Lock()
	now := c.clock()
	if !c.hasSecret || now.Sub(c.secretSet) > protocol.CookieRefreshTime {
		if _, err := rand.Read(c.secret[:]); err != nil {
			c.mu.Unlock()
			return fmt.Errorf("renew cookie secret: %w", err)
		}
		c.secretSet = now
		c.hasSecret = true
	}
	c.cookieFor(&cookie, src)
	c.mu.Unlock()

	clear(dst[:])
	dst[0] = TypeCookieReply
	copy(dst[CookieReplyOffsetReceiver:CookieReplyOffsetReceiver+4], msg[4:8]) // the sender index of msg
	nonce := dst[CookieReplyOffsetNonce:CookieReplyOffsetCookie]
	if _, err := rand.Read(nonce); err != nil {
		clear(cookie[:])
		return fmt.Errorf("cookie nonce: %w", err)
	}
	aead, _ := chacha20poly1305.NewX(c.cookieKey[:])
	aead.Seal(dst[CookieReplyOffsetCookie:CookieReplyOffsetCookie], nonce, cookie[:], msg[off:off+MACSize])
	clear(cookie[:])
	c.stats.cookieRepliesCreated.Add(1)
	return nil
}

// CookieGenerator is the initiator's half of the cookie mechanism (section
// 5.4.7), one per peer: it stamps MAC1 and, while it holds a fresh cookie,
// MAC2 on the handshake messages we send to the peer, and takes in the
// peer's cookie replies. A cookie is used for [protocol.CookieRefreshTime] minus
// CookieLatency after it arrived. A Handshake holds one; safe for concurrent
// use.
type CookieGenerator struct {
	cookieKeys // of the peer's public key

	mu          sync.Mutex
	cookie      [MACSize]byte // guarded by mu
	cookieSet   time.Time     // guarded by mu
	hasCookie   bool          // guarded by mu
	lastMAC1    [MACSize]byte // guarded by mu
	hasLastMAC1 bool          // guarded by mu
}

func (g *CookieGenerator) zero() {
	g.mu.Lock()
	clear(g.cookie[:])
	g.hasCookie = false
	g.hasLastMAC1 = false
	clear(g.lastMAC1[:])
	g.mu.Unlock()
}

// AddMACs writes MAC1, and MAC2 if a fresh cookie is held (else zeros), into
// msg, a complete handshake initiation or response addressed to the peer
// (section 5.4.4), and remembers MAC1 so that a cookie reply to msg can be
// recognised. It returns a DropReason for a msg of the wrong size.
func (g *CookieGenerator) AddMACs(msg []byte) error {
	off, err := macOffsets(msg)
	if err != nil {
		return err
	}
	var m1 [MACSize]byte
	mac(&m1, g.mac1Key[:], msg[:off])
	copy(msg[off:], m1[:])
	mac2 := msg[off+MACSize : off+2*MACSize]
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastMAC1 = m1
	g.hasLastMAC1 = true
	if !g.hasCookie || g.clock().Sub(g.cookieSet) > protocol.CookieRefreshTime-CookieLatency {
		clear(mac2)
		return nil
	}
	var m2 [MACSize]byte
	mac(&m2, g.cookie[:], msg[:off+MACSize])
	copy(mac2, m2[:])
	return nil
}

// ConsumeReply takes in msg, a cookie reply from the peer (64 bytes, type 3).
// It succeeds only if msg decrypts with our last sent MAC1 as associated data,
// that is, if it answers a message we sent; the cookie then replaces any
// earlier one. The receiver index is the caller's to match (it chose which
// peer's generator to give msg to). Errors are DropReasons, counted.
func (g *CookieGenerator) ConsumeReply(msg []byte) error {
	if len(msg) != CookieReplySize {
		return g.stats.drop(DropWrongSize)
	}
	if binary.LittleEndian.Uint32(msg) != TypeCookieReply {
		return g.stats.drop(DropWrongType)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.hasLastMAC1 {
		return g.stats.drop(DropNoMAC1Sent)
	}
	var cookie [MACSize]byte
	aead, _ := chacha20poly1305.NewX(g.cookieKey[:])
	_, err := aead.Open(cookie[:0], msg[CookieReplyOffsetNonce:CookieReplyOffsetCookie],
		msg[CookieReplyOffsetCookie:], g.lastMAC1[:])
	if err != nil {
		return g.stats.drop(DropDecryptFailed)
	}
	g.cookie = cookie
	clear(cookie[:])
	g.cookieSet = g.clock()
	g.hasCookie = true
	g.stats.cookieRepliesConsumed.Add(1)
	return nil
}
