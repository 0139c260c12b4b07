package header

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// ErrorSource returns, of nets (a router's addresses on the interface an
// ICMP error leaves by, each with its prefix length), the source of an
// error to dst, as Linux picks it: IPv4, the first address whose subnet
// holds dst (the preferred source of the connected route back); IPv6,
// the one with the longest prefix in common with dst, counted up to its
// own prefix length (RFC 6724 §5 rule 8), the first of equals. It returns
// the zero Addr when no address of dst's family shares a subnet (IPv4)
// or a bit of prefix (IPv6) with dst: the caller then takes its default
// (the interface's first address of the family). It allocates nothing.
func ErrorSource(nets []netip.Prefix, dst netip.Addr) netip.Addr {
	var best netip.Addr
	bestLen := 0
	for _, n := range nets {
		a := n.Addr()
		if a.Is4() != dst.Is4() {
			continue
		}
		if dst.Is4() {
			if n.Contains(dst) {
				return a
			}
			continue
		}
		if l := min(commonPrefixLen(a, dst), n.Bits()); l > bestLen {
			best, bestLen = a, l
		}
	}
	return best
}

// commonPrefixLen is the number of leading bits a and b (both IPv6) share.
func commonPrefixLen(a, b netip.Addr) int {
	x, y := a.As16(), b.As16()
	hi := binary.BigEndian.Uint64(x[:8]) ^ binary.BigEndian.Uint64(y[:8])
	if hi != 0 {
		return bits.LeadingZeros64(hi)
	}
	return 64 + bits.LeadingZeros64(binary.BigEndian.Uint64(x[8:])^binary.BigEndian.Uint64(y[8:]))
}
