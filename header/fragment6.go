package header

import "encoding/binary"

// IPv6FragmentLen is the length in bytes of the IPv6 Fragment extension
// header (RFC 8200 §4.5).
const IPv6FragmentLen = ipv6FragmentLen

// IPv6Fragmenter cuts one IPv6 packet into fragments of at most an MTU, as
// its source may (RFC 8200 §4.5 and §5; routers never fragment IPv6). The
// packet's fixed header is its unfragmentable part: every fragment carries
// a copy of it (payload length set, Next Header 44) and a Fragment header
// with the packet's Next Header, the fragment's offset in 8-byte units, the
// M flag on all but the last, and one identification. Every fragment but
// the last carries a multiple of 8 bytes of the fragmentable part
// (everything after the fixed header). A packet that starts with a
// Hop-by-Hop Options, Routing or Fragment header is refused: those belong
// to the unfragmentable part, which this fragmenter does not extend (the
// packets it is for, a tunnel's outer UDP datagrams, have none).
//
// Use: Reset with the packet, the MTU and the identification; Count
// fragments; Put fragments 1 to Count()−1 into buffers of their own;
// PutFirst last. Each fragment is 8 bytes longer than the part of the
// packet it carries, so fragment 0 cannot be rewritten in place:
// PutFirst writes it into a buffer that starts exactly IPv6FragmentLen
// bytes before the packet in the same array (the headroom of a frame, the
// fragment's data then staying where they are), or into one of its own.
//
// The zero value is ready for Reset. A Fragmenter keeps the packet slice
// between Reset and the last call; it is single-owner and allocates
// nothing.
type IPv6Fragmenter struct {
	p     []byte
	plen  int    // the packet's payload length (its fragmentable part)
	d     int    // fragmentable bytes in each full fragment
	n     int    // number of fragments
	next  uint8  // the packet's Next Header, carried by the Fragment headers
	id    uint32 // identification of all the fragments
	fixed [IPv6Len]byte
}

// Reset prepares the fragmentation of the IPv6 packet p (from its fixed
// header; bytes past its payload length are ignored) into fragments of at
// most mtu bytes, all with identification id (RFC 8200 §4.5: unique among
// the source's recent fragmented packets to the same destination; RFC 7739
// recommends it be unpredictable). It returns ReasonTruncatedIP,
// ReasonBadVersion or ReasonLengthExceedsFrame for a header that is short,
// not version 6 or whose payload length runs past p; ReasonFragment for a
// packet that already carries a Fragment header; ReasonBadExtensionHeader
// for one that starts with a Hop-by-Hop Options or Routing header (see
// the type); ReasonBufferTooSmall when mtu cannot hold a fragment with 8
// bytes of data (56 bytes; IPv6 links have at least IPv6MinMTU). A packet
// no larger than mtu gives one fragment, the packet itself, to be sent as
// it is (PutFirst is then not called).
func (f *IPv6Fragmenter) Reset(p []byte, mtu int, id uint32) Reason {
	*f = IPv6Fragmenter{}
	if len(p) < IPv6Len {
		return ReasonTruncatedIP
	}
	h := IPv6(p)
	if h.Version() != IPv6Version {
		return ReasonBadVersion
	}
	plen := int(binary.BigEndian.Uint16(p[4:6]))
	if IPv6Len+plen > len(p) {
		return ReasonLengthExceedsFrame
	}
	switch p[6] {
	case ProtoFragment:
		return ReasonFragment
	case ProtoHopByHop, ProtoRouting:
		return ReasonBadExtensionHeader
	}
	if IPv6Len+plen <= mtu {
		f.p, f.plen, f.n = p[:IPv6Len+plen], plen, 1
		return OK
	}
	d := (mtu - IPv6Len - ipv6FragmentLen) &^ 7
	if d < 8 {
		return ReasonBufferTooSmall
	}
	f.p, f.plen, f.d, f.next, f.id = p[:IPv6Len+plen], plen, d, p[6], id
	f.n = (plen + d - 1) / d
	copy(f.fixed[:], p[:IPv6Len])
	return OK
}

// Count returns the number of fragments (1 when the packet fits the MTU;
// 0 before a successful Reset).
func (f *IPv6Fragmenter) Count() int { return f.n }

// Len returns the length in bytes of fragment i, 0 <= i < Count() (with
// one fragment, the packet's).
func (f *IPv6Fragmenter) Len(i int) int {
	if f.n == 1 {
		return len(f.p)
	}
	return IPv6Len + ipv6FragmentLen + min(f.d, f.plen-i*f.d)
}

// Put writes fragment i, 1 <= i < Count(), into b (len(b) >= Len(i)) and
// returns its length. b must not overlap the packet.
func (f *IPv6Fragmenter) Put(b []byte, i int) int {
	off := i * f.d
	n := min(f.d, f.plen-off)
	f.header(b, i, n)
	copy(b[IPv6Len+ipv6FragmentLen:], f.p[IPv6Len+off:IPv6Len+off+n])
	return IPv6Len + ipv6FragmentLen + n
}

// PutFirst writes fragment 0 into dst (len(dst) >= Len(0)) and returns
// its length. dst either starts IPv6FragmentLen bytes before the packet
// in the same array, or does not overlap it; with Count() > 1 only, and
// after the Put calls (it overwrites the packet's header).
func (f *IPv6Fragmenter) PutFirst(dst []byte) int {
	n := f.d
	// The data first: with dst 8 bytes before the packet they are where
	// they belong already, and otherwise the packet's header, which dst
	// may hold, has not been written yet.
	data := dst[IPv6Len+ipv6FragmentLen : IPv6Len+ipv6FragmentLen+n]
	if src := f.p[IPv6Len : IPv6Len+n]; &data[0] != &src[0] {
		copy(data, src)
	}
	f.header(dst, 0, n)
	return IPv6Len + ipv6FragmentLen + n
}

// header writes, at b, fragment i's fixed header (from the packet's, with
// the payload length of n bytes of data and Next Header 44) and its
// Fragment header.
func (f *IPv6Fragmenter) header(b []byte, i, n int) {
	copy(b[:IPv6Len], f.fixed[:])
	binary.BigEndian.PutUint16(b[4:6], uint16(ipv6FragmentLen+n))
	b[6] = ProtoFragment
	fh := b[IPv6Len : IPv6Len+ipv6FragmentLen]
	fh[0], fh[1] = f.next, 0
	om := uint16(i * f.d) // a multiple of 8: the offset in units of 8 in its top 13 bits
	if i < f.n-1 {
		om |= 1 // M
	}
	binary.BigEndian.PutUint16(fh[2:4], om)
	binary.BigEndian.PutUint32(fh[4:8], f.id)
}
