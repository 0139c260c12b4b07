package header

import "encoding/binary"

// Transit is a router's verdict on a transit packet's addresses and
// options (TransitAddrs, TransitOptions): TransitOK forwards it, the
// others say why it is dropped. Callers count the drop by this reason.
type Transit uint8

// Verdicts of TransitAddrs and TransitOptions.
const (
	TransitOK Transit = iota
	// TransitMartian: an address no router forwards (TransitAddrs).
	TransitMartian
	// TransitMulticast: a multicast or limited-broadcast destination.
	TransitMulticast
	// TransitIPOptions: IPv4 options or an IPv6 hop-by-hop header Linux
	// does not forward (TransitOptions).
	TransitIPOptions
	// TransitBeyondScope: an IPv6 link-local source to a unicast
	// destination beyond its link (TransitAddrs), which a router answers
	// with destination unreachable, code 2, "beyond scope of source
	// address" (RFC 4443 §3.1; PutICMPv6BeyondScope).
	TransitBeyondScope
)

// TransitAddrs judges the addresses of the transit IP packet p (IPv4 or
// IPv6 by its version nibble, header checked) as Linux's forwarding path
// does, and returns TransitOK when it may be forwarded; if not, why:
//   - TransitMartian: an IPv4 source 0.0.0.0, 127/8, multicast or
//     255.255.255.255, or destination 0.0.0.0 or 127/8 (Linux
//     ip_route_input_slow's "martian source" and "martian destination";
//     the rest of 0/8 and 240/4 Linux forwards, RFC 1812 §5.3.7
//     notwithstanding: seen on Linux 6.18); an IPv6 source ::, ::1 or
//     multicast (RFC 4291 §2.7), or destination ::1 or link-local (RFC
//     4291 §2.5.6: never forwarded off its link; Linux ip6_rcv_core and
//     ip6_forward). An IPv6 destination :: and IPv4-mapped addresses are
//     forwarded, as Linux does.
//   - TransitMulticast: a multicast or limited-broadcast destination,
//     which Linux forwards only with a multicast routing daemon
//     (multicast) or never (255.255.255.255, RFC 1812 §5.3.5.1),
//     whatever its source but those above: a link-local source may send
//     to a group (RFC 4291 §2.5.6), and Linux delivers such a packet
//     locally (ip6_mc_input).
//   - TransitBeyondScope: an IPv6 link-local source (RFC 4291 §2.5.6) to
//     any other destination, which Linux's ip6_forward drops and answers
//     with "beyond scope of source address" (RFC 4443 §3.1), unless the
//     packet leaves by the interface it came in by: that branch of
//     ip6_forward (where it sends a redirect) does not judge the source,
//     and Linux's wg0 sends such a packet on to the peer whose allowed
//     IPs hold its destination (seen on Linux 6.18). The caller, which
//     knows the route, decides; its hop limit is judged first (time
//     exceeded, as ip6_forward).
//
// Callers ask PlainUnicast first, which settles the common packet inline.
// The host's own addresses are the caller's to judge (it knows them).
//
//go:noinline
func TransitAddrs(p []byte) Transit {
	if p[0]>>4 == IPv4Version {
		s, d := binary.BigEndian.Uint32(p[12:16]), binary.BigEndian.Uint32(p[16:20])
		switch {
		case s == 0, s>>24 == 127, s>>28 == 0xe, s == 0xffffffff, d == 0, d>>24 == 127:
			return TransitMartian
		case d>>28 == 0xe, d == 0xffffffff:
			return TransitMulticast
		}
		return TransitOK
	}
	// By the bytes, not netip's predicates, which unmap an IPv4-mapped
	// address first: Linux judges ::ffff:127.0.0.1 as IPv6 (forwarded).
	src, dst := p[8:24], p[24:40]
	switch {
	case src[0] == 0 && zeroOrOne(src), src[0] == 0xff,
		dst[0] == 0 && zeroOrOne(dst) && dst[15] == 1, linkLocal6(dst):
		return TransitMartian
	case dst[0] == 0xff:
		return TransitMulticast
	case linkLocal6(src):
		return TransitBeyondScope
	}
	return TransitOK
}

// PlainUnicast reports whether the first bytes of both addresses of the IP
// packet p (header checked) show that TransitAddrs would pass it: IPv4
// 1-126 or 128-223, IPv6 01-fd. Two table loads, inlined in the hot loops;
// false means: ask TransitAddrs.
func PlainUnicast(p []byte) bool {
	if p[0]>>4 == IPv4Version {
		return addrClass[p[12]]&addrClass[p[16]]&plain4 != 0
	}
	return addrClass[p[8]]&addrClass[p[24]]&plain6 != 0
}

// MartianSource reports whether the source address of the IP packet p
// (header checked) is one that Linux's IP input drops in a packet
// addressed to the host, as a UDP socket never sees it: IPv4 0.0.0.0/8,
// 127.0.0.0/8, 224.0.0.0/4 and 255.255.255.255 (ip_route_input_slow's
// martian sources), IPv6 ::1 (RFC 4291 §2.5.3), ff00::/8 (§2.7) and
// ::ffff:0:0/96 (§2.5.5.2) (ip6_rcv_core); and the IPv6 unspecified
// address ::, which Linux's UDP takes but to which no reply can go. A
// packet PlainUnicast passes has none of these: the hot loops ask that
// first.
func MartianSource(p []byte) bool {
	if p[0]>>4 == IPv4Version {
		b := p[12]
		return b == 0 || b == 127 || b>>4 == 0xe || binary.BigEndian.Uint32(p[12:16]) == 0xffffffff
	}
	s := p[8:24]
	if s[0] == 0xff {
		return true
	}
	return zeroOrOne(s) || binary.BigEndian.Uint64(s[0:8]) == 0 && binary.BigEndian.Uint32(s[8:12]) == 0xffff
}

// addrClass holds, by the first byte of an address, plain4 (IPv4 1-126,
// 128-223) and plain6 (IPv6 01-fd): prefixes whose every address Linux
// forwards.
var addrClass = func() (t [256]uint8) {
	for b := range t {
		if b >= 1 && b <= 223 && b != 127 {
			t[b] |= plain4
		}
		if b >= 1 && b <= 0xfd {
			t[b] |= plain6
		}
	}
	return t
}()

const (
	plain4 = 1 << iota
	plain6
)

// zeroOrOne reports whether the IPv6 address a is :: or ::1.
func zeroOrOne(a []byte) bool {
	return binary.BigEndian.Uint64(a[0:8]) == 0 && binary.BigEndian.Uint64(a[8:16]) <= 1
}

// linkLocal6 reports whether the IPv6 address a is in fe80::/10.
func linkLocal6(a []byte) bool { return a[0] == 0xfe && a[1]&0xc0 == 0x80 }
