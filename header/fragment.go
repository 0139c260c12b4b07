package header

import "encoding/binary"

// IPv4 option bits (RFC 791 §3.1 "Options").
const (
	ipv4OptEOL    = 0    // end of option list
	ipv4OptNOP    = 1    // no operation
	ipv4OptCopied = 0x80 // copy flag: the option goes into every fragment
	// IPv4MinMTU is the smallest MTU every IPv4 link has: a 60-byte
	// header and 8 bytes of data (RFC 791 §3.2).
	IPv4MinMTU = 68
)

// IPv4Fragmenter cuts one IPv4 packet into fragments of at most an MTU
// (RFC 791 §3.2 "Fragmentation and reassembly", §3.1 for the copy flag;
// RFC 1812 §5.2.6). Fragment 0 keeps the original header with all its
// options; the others carry only the options whose copy flag is set. Every
// fragment but the last carries a multiple of 8 data bytes; all keep the
// identification, TTL, TOS and protocol. A packet that is itself a fragment
// is cut within its own offset range: the pieces' offsets start at its
// offset, and its last piece keeps its MF flag.
//
// Use: Reset with the packet and the MTU; Count fragments; Put fragments 1
// to Count()−1 into buffers of their own; PutFirst last (it rewrites the
// packet's header in place as fragment 0; the data of the later fragments
// past it are left as they were, so the order is free as long as the
// packet's bytes are not otherwise overwritten).
//
// The zero value is ready for Reset. A Fragmenter keeps the packet slice
// between Reset and the last call; it is single-owner and allocates
// nothing.
type IPv4Fragmenter struct {
	p      []byte
	hl     int  // header length of the packet (and of fragment 0)
	chl    int  // header length of the other fragments
	total  int  // the packet's total length
	d0, dn int  // data bytes in fragment 0 and in each later full fragment
	base   int  // the packet's own fragment offset, in bytes
	mf     bool // the packet's own MF flag
	n      int  // number of fragments
	opts   [IPv4MaxLen - IPv4MinLen]byte
}

// Reset prepares the fragmentation of the IPv4 packet p (from its header;
// bytes past its total length are ignored) into fragments of at most mtu
// bytes. It checks the header as ParseIP would (version, IHL, total length
// within p) and returns that reason if not; ReasonBufferTooSmall when mtu
// cannot hold a fragment of this header and 8 data bytes (mtu below
// IPv4MinMTU for any header); ReasonBadTotalLength for a fragment whose
// data reach so far past 65,535 bytes (RFC 791 §3.1: no datagram is that
// long) that a piece would start past the largest offset, 65,528 (Linux's
// ip_do_fragment writes such an offset into the flag bits: a corrupt
// fragment either way). It does not look at DF: forwarding a DF
// packet that needs fragmenting is the caller's "fragmentation needed".
// A packet no larger than mtu gives one fragment, the packet itself.
func (f *IPv4Fragmenter) Reset(p []byte, mtu int) Reason {
	*f = IPv4Fragmenter{}
	if len(p) < IPv4MinLen {
		return ReasonTruncatedIP
	}
	h := IPv4(p)
	if h.Version() != IPv4Version {
		return ReasonBadVersion
	}
	hl := h.HeaderLen()
	if hl < IPv4MinLen || hl > len(p) {
		return ReasonBadIHL
	}
	total := h.TotalLength()
	if total < hl {
		return ReasonBadTotalLength
	}
	if total > len(p) {
		return ReasonLengthExceedsFrame
	}
	// Options whose copy flag is set, for fragments 1 and later.
	no := 0
	for o := h[IPv4MinLen:hl]; len(o) > 0; {
		t := o[0]
		if t == ipv4OptEOL {
			break
		}
		if t == ipv4OptNOP {
			o = o[1:]
			continue
		}
		if len(o) < 2 || int(o[1]) < 2 || int(o[1]) > len(o) {
			break // a malformed option ends the list (the rest is not copied)
		}
		l := int(o[1])
		if t&ipv4OptCopied != 0 {
			no += copy(f.opts[no:], o[:l])
		}
		o = o[l:]
	}
	chl := (IPv4MinLen + no + 3) &^ 3
	clear(f.opts[no : chl-IPv4MinLen]) // EOL padding
	f.p, f.hl, f.chl, f.total = p[:total], hl, chl, total
	f.base, f.mf = h.FragmentOffset(), h.MoreFragments()
	data := total - hl
	if total <= mtu {
		f.n, f.d0 = 1, data
		return OK
	}
	f.d0 = (mtu - hl) &^ 7
	f.dn = (mtu - chl) &^ 7
	if f.d0 < 8 || f.dn < 8 {
		*f = IPv4Fragmenter{}
		return ReasonBufferTooSmall
	}
	f.n = 1 + (data-f.d0+f.dn-1)/f.dn
	if f.base+f.d0+(f.n-2)*f.dn > ipv4FragOffMask<<3 {
		*f = IPv4Fragmenter{}
		return ReasonBadTotalLength
	}
	return OK
}

// Count returns the number of fragments (1 when the packet fits the MTU;
// 0 before a successful Reset).
func (f *IPv4Fragmenter) Count() int { return f.n }

// Len returns the length in bytes of fragment i, 0 <= i < Count().
func (f *IPv4Fragmenter) Len(i int) int {
	if i == 0 {
		return f.hl + f.d0
	}
	start := f.hl + f.d0 + (i-1)*f.dn
	return f.chl + min(f.dn, f.total-start)
}

// Put writes fragment i, 1 <= i < Count(), into b (len(b) >= Len(i)) and
// returns its length. b must not overlap the packet.
func (f *IPv4Fragmenter) Put(b []byte, i int) int {
	start := f.hl + f.d0 + (i-1)*f.dn // in the packet
	n := min(f.dn, f.total-start)
	last := i == f.n-1
	copy(b[:IPv4MinLen], f.p[:IPv4MinLen])
	copy(b[IPv4MinLen:f.chl], f.opts[:f.chl-IPv4MinLen])
	copy(b[f.chl:f.chl+n], f.p[start:start+n])
	b[0] = IPv4Version<<4 | uint8(f.chl/4)
	f.header(b, f.chl+n, f.base+start-f.hl, !last || f.mf)
	return f.chl + n
}

// PutFirst rewrites the packet's header in place as fragment 0 (total
// length, MF) and returns its length, Len(0). With one fragment it leaves
// the packet as it is.
func (f *IPv4Fragmenter) PutFirst() int {
	if f.n <= 1 {
		return f.total
	}
	f.header(f.p, f.hl+f.d0, f.base, true)
	return f.hl + f.d0
}

// header sets the total length, the flags and offset (DF kept as it was),
// and the checksum of the fragment header at b.
func (f *IPv4Fragmenter) header(b []byte, total, off int, mf bool) {
	binary.BigEndian.PutUint16(b[2:4], uint16(total))
	ff := binary.BigEndian.Uint16(f.p[6:8])&ipv4FlagDF | uint16(off/8)&ipv4FragOffMask
	if mf {
		ff |= ipv4FlagMF
	}
	binary.BigEndian.PutUint16(b[6:8], ff)
	binary.BigEndian.PutUint16(b[10:12], 0)
	IPv4(b).SetChecksum()
}
