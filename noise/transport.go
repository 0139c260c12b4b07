package noise

import "encoding/binary"

// PutTransportHeader writes the 16-byte header of a transport data message
// (section 5.4.6): type 4 and three zero bytes, the receiver index
// (little-endian) and the counter (64-bit little-endian), into
// dst[:TransportHeaderSize]. dst must be at least TransportHeaderSize long;
// the encrypted packet follows at TransportOffsetContent.
func PutTransportHeader(dst []byte, receiver uint32, counter uint64) {
	_ = dst[TransportHeaderSize-1]
	binary.LittleEndian.PutUint32(dst, TypeTransport)
	binary.LittleEndian.PutUint32(dst[TransportOffsetReceiver:], receiver)
	binary.LittleEndian.PutUint64(dst[TransportOffsetCounter:], counter)
}

// ParseTransportHeader returns the receiver index and counter of msg, a
// transport data message. ok is false if msg is shorter than
// TransportMinSize (header and tag: a keepalive) or its first four bytes
// are not type 4. It does not allocate.
func ParseTransportHeader(msg []byte) (receiver uint32, counter uint64, ok bool) {
	if len(msg) < TransportMinSize || binary.LittleEndian.Uint32(msg) != TypeTransport {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint32(msg[TransportOffsetReceiver:]),
		binary.LittleEndian.Uint64(msg[TransportOffsetCounter:]), true
}

// PutNonce writes the ChaCha20-Poly1305 nonce of transport data with the
// given counter: 4 zero bytes and the counter as 64-bit little-endian
// (section 5.4.6; RFC 7539's 96-bit nonce).
func PutNonce(nonce *[TransportNonceSize]byte, counter uint64) {
	binary.LittleEndian.PutUint32(nonce[:4], 0)
	binary.LittleEndian.PutUint64(nonce[4:], counter)
}

// PaddingLen returns how many zero bytes to append to a plaintext packet of
// n bytes before sealing it (section 5.4.6): up to the next multiple of
// PaddingMultiple (16), but never past mtu, the tunnel's MTU in bytes. A
// packet already longer than mtu gets no padding. mtu <= 0 means no limit.
// n is a length: a negative n is the caller's bug, and PaddingLen panics,
// as a slice index does, rather than return a padding for it. It does not
// allocate.
func PaddingLen(n, mtu int) int {
	if n < 0 {
		panic("noise: PaddingLen of a negative length")
	}
	// -n mod 16, which, unlike rounding n+15 down, cannot overflow.
	pad := -n & (PaddingMultiple - 1)
	if mtu > 0 && pad > mtu-n {
		pad = max(mtu-n, 0)
	}
	return pad
}
