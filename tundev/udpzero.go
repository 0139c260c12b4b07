package tundev

import (
	"encoding/binary"

	"github.com/wgpio/wgpio/header"
)

// udpZeroChecksum mends in place the UDP checksum of p, an IP packet (no
// IPv6 extension headers, not an IPv4 fragment), whose checksum field is
// 0 although the checksum it was computed to is "all ones": RFC 768 sends
// a computed 0 as 0xffff, since 0 in the field means "no checksum" (IPv4)
// or is invalid (IPv6, RFC 8200 §8.1: the receiver drops it).
// wireguard-go's tun, which completes the checksums the kernel leaves to
// the device (OffloadTUN.Read: a packet with NEEDS_CSUM, or the segments of
// a GSO one), writes the complement of the sum as it is, 0 for about one
// datagram in 65,536. A field that is 0 because the sender sent none
// (IPv4; an IPv6 tunnel's zero checksum, RFC 6936) sums to something
// else and is left as it is (in the one case in 65,536 where it does not,
// 0xffff is its valid checksum). It reads p only when the field is 0.
func udpZeroChecksum(p []byte) {
	var iph int
	var src, dst []byte
	switch {
	case len(p) >= header.IPv4MinLen && p[0]>>4 == header.IPv4Version:
		iph = int(p[0]&0x0f) * 4
		if p[9] != header.ProtoUDP || iph < header.IPv4MinLen || binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 {
			return // not UDP, or a fragment (its checksum covers the whole datagram)
		}
		src, dst = p[12:16], p[16:20]
	case len(p) >= header.IPv6Len && p[0]>>4 == header.IPv6Version:
		iph = header.IPv6Len
		if p[6] != header.ProtoUDP {
			return
		}
		src, dst = p[8:24], p[24:40]
	default:
		return
	}
	if len(p) < iph+header.UDPLen || p[iph+6] != 0 || p[iph+7] != 0 {
		return
	}
	u := p[iph:]
	if l := int(binary.BigEndian.Uint16(u[4:6])); l >= header.UDPLen && l <= len(u) {
		u = u[:l]
	} else {
		return // a length that does not parse: left to the receiver
	}
	sum := header.Checksum(u, header.PseudoHeaderChecksumBytes(header.ProtoUDP, src, dst, len(u)))
	if header.FoldChecksum(sum) == 0xffff {
		u[6], u[7] = 0xff, 0xff
	}
}
