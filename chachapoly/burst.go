package chachapoly

// Packet is one message of a burst, sealed or opened in place.
//
// Data holds the message followed by room for its tag: for [Seal], the
// plaintext in Data[:len(Data)-TagSize] (replaced by the ciphertext) and
// TagSize bytes at the end that receive the tag; for [Open], the ciphertext
// followed by its tag, and the plaintext replaces the ciphertext. len(Data)
// must be at least TagSize. Data may have any alignment; the caller keeps
// ownership and the package keeps no reference after the call returns.
//
// The nonce is the 96-bit RFC 8439 nonce made of 32 zero bits followed by
// Counter in little-endian order (WireGuard's, whitepaper §5.4.6). AD is the
// additional data, empty for WireGuard; it is only read.
type Packet struct {
	Key     *Key
	Counter uint64
	Data    []byte
	AD      []byte

	// nonce0 is the first 32-bit word of the nonce, zero in WireGuard;
	// only the tests set it, to run published vectors.
	nonce0 uint32

	// nonce is the fallback's scratch for the nonce bytes: the AEAD
	// interface call would move a local array to the heap.
	nonce [12]byte
}

// Seal encrypts and authenticates every packet of pkts in place, as
// x/crypto's chacha20poly1305 Seal(p.Data[:0], nonce, p.Data[:n], p.AD)
// would, with n = len(p.Data)-TagSize. Packets may use different keys. The
// Data of different packets must not overlap (an overlapping burst gives
// unspecified results), and no packet's AD may overlap any packet's Data
// (the implementations read AD at different times: the SIMD ones before
// any packet is decrypted).
//
// Seal allocates nothing on amd64 (its SIMD kernels, or x/crypto's
// assembly; on other architectures, and with the purego build tag, x/crypto's
// portable code allocates once a packet), and is safe for concurrent use
// with other Seal and Open calls on other packets, including calls that
// share keys. It panics, before it touches a packet, if a packet's Data is
// shorter than TagSize or longer than 2^31-64 bytes, or its Key is nil. A
// Key not Set, or erased by [Key.Zero], is not refused: it works as the
// all-zero key (see [Key]).
func Seal(pkts []Packet) {
	check(pkts)
	active.seal(pkts)
}

// Open authenticates and decrypts every packet of pkts in place, as
// x/crypto's chacha20poly1305 Open would, and reports each packet's result in
// ok: ok[i] is true when pkts[i] is authentic, and its plaintext is then in
// pkts[i].Data[:len(pkts[i].Data)-TagSize]. A packet that fails has that
// plaintext area zeroed (as x/crypto does) and ok[i] false; the other
// packets of the burst are unaffected. Its tag bytes are left as they were.
// len(ok) must be at least len(pkts): Open panics otherwise, before it
// touches a packet. Open returns the number of packets that failed.
//
// Allocation, concurrency and the other panics as for [Seal].
func Open(pkts []Packet, ok []bool) (failed int) {
	if len(ok) < len(pkts) {
		panic("chachapoly: ok shorter than pkts")
	}
	check(pkts)
	ok = ok[:len(pkts)]
	active.open(pkts, ok)
	for _, v := range ok {
		if !v {
			failed++
		}
	}
	return failed
}

// maxLen is the longest Data a Packet may have: the SIMD schedule keeps
// a seal job's length, the one-time key's block and the message (64 +
// len(Data) - TagSize), in an int32 (job.n). At 2^31-1, Data from 2^31-48
// bytes on overflowed it, and the kernels skipped the lane: the
// plaintext left as it was, with a zero tag (TestMaxLen).
const maxLen = 1<<31 - 64

// Compiled only while every seal job's length fits an int32.
const _ uint32 = 1<<31 - 1 - (64 + maxLen - TagSize)

func check(pkts []Packet) {
	for i := range pkts {
		if len(pkts[i].Data) < TagSize {
			panic("chachapoly: packet shorter than a tag")
		}
		if len(pkts[i].Data) > maxLen {
			panic("chachapoly: packet longer than 2 GiB - 64 bytes")
		}
		if pkts[i].Key == nil {
			panic("chachapoly: packet without a key")
		}
	}
}

// impl is one implementation of the burst operations.
type impl int

const (
	implGeneric    impl = iota // x/crypto per packet
	implAVX2                   // 8-lane ChaCha20, Poly1305 per lane (scalar)
	implAVX512                 // 16-lane ChaCha20, Poly1305 per lane (scalar)
	implAVX512IFMA             // 16-lane ChaCha20, IFMA Poly1305 in two halves of 8 lanes
)

func (i impl) String() string {
	switch i {
	case implGeneric:
		return "generic"
	case implAVX2:
		return "avx2"
	case implAVX512:
		return "avx512"
	case implAVX512IFMA:
		return "avx512ifma"
	}
	return "unknown"
}

// poly8Always makes the avx2 and avx512 implementations MAC every group of
// messages with the AVX2 Poly1305 kernel, whatever its size and lengths (by
// default only full groups of long messages, where it is faster): a test
// knob, so that the kernel is checked at every length.
var poly8Always = false

// active is the implementation in use, chosen once at start-up from the
// CPU's features (see detect), and changed only by tests through setImpl.
var active = detect()

func (i impl) seal(pkts []Packet) {
	switch i {
	case implAVX2, implAVX512, implAVX512IFMA:
		sealSIMD(pkts, i)
	default:
		sealGeneric(pkts)
	}
}

func (i impl) open(pkts []Packet, ok []bool) {
	switch i {
	case implAVX2, implAVX512, implAVX512IFMA:
		openSIMD(pkts, ok, i)
	default:
		openGeneric(pkts, ok)
	}
}
