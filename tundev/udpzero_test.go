package tundev

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestUDPZeroChecksum: a UDP checksum field of 0 becomes 0xffff only
// where the datagram's checksum computes to 0 (IPv4 and IPv6); a datagram
// sent without a checksum (IPv4's 0, an IPv6 tunnel's, RFC 6936), one
// with a checksum, an IPv4 fragment and a length that does not parse are
// left as they are; no allocation.
func TestUDPZeroChecksum(t *testing.T) {
	src4, dst4 := netip.MustParseAddr("198.18.82.1"), netip.MustParseAddr("198.18.82.2")
	src6, dst6 := netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::2")
	build := func(src, dst netip.Addr, payload []byte, allOnes bool) []byte {
		u := make([]byte, header.UDPLen+len(payload))
		binary.BigEndian.PutUint16(u[0:2], 4000)
		binary.BigEndian.PutUint16(u[2:4], 9)
		binary.BigEndian.PutUint16(u[4:6], uint16(len(u)))
		copy(u[header.UDPLen:], payload)
		if allOnes {
			u[len(u)-2], u[len(u)-1] = 0, 0
			s := header.FoldChecksum(header.Checksum(u, header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, len(u))))
			binary.BigEndian.PutUint16(u[len(u)-2:], 0xffff-s)
		}
		var ip []byte
		if src.Is4() {
			ip = make([]byte, header.IPv4MinLen)
			ip[0], ip[8], ip[9] = 0x45, 64, header.ProtoUDP
			binary.BigEndian.PutUint16(ip[2:4], uint16(len(ip)+len(u)))
			s4, d4 := src.As4(), dst.As4()
			copy(ip[12:16], s4[:])
			copy(ip[16:20], d4[:])
		} else {
			ip = make([]byte, header.IPv6Len)
			ip[0], ip[6], ip[7] = 0x60, header.ProtoUDP, 64
			binary.BigEndian.PutUint16(ip[4:6], uint16(len(u)))
			s16, d16 := src.As16(), dst.As16()
			copy(ip[8:24], s16[:])
			copy(ip[24:40], d16[:])
		}
		return append(ip, u...)
	}
	payload := []byte("sixteen bytes...")
	for _, c := range []struct {
		name    string
		pkt     []byte
		csumAt  int
		wantSum uint16
	}{
		{"ipv4 computed 0", build(src4, dst4, payload, true), 26, 0xffff},
		{"ipv6 computed 0", build(src6, dst6, payload, true), 46, 0xffff},
		{"ipv4 no checksum", build(src4, dst4, payload, false), 26, 0},
		{"ipv6 zero checksum", build(src6, dst6, payload, false), 46, 0},
	} {
		udpZeroChecksum(c.pkt)
		if got := binary.BigEndian.Uint16(c.pkt[c.csumAt:]); got != c.wantSum {
			t.Errorf("%s: checksum %#04x, want %#04x", c.name, got, c.wantSum)
		}
	}
	// Left alone: a checksum already there, a fragment, a bad length.
	withSum := build(src4, dst4, payload, true)
	binary.BigEndian.PutUint16(withSum[26:], 0x1234)
	frag := build(src4, dst4, payload, true)
	frag[6] = 0x20 // MF
	badLen := build(src6, dst6, payload, true)
	binary.BigEndian.PutUint16(badLen[44:46], 200)
	for _, p := range [][]byte{withSum, frag, badLen, {0x45}, nil} {
		was := bytes.Clone(p)
		udpZeroChecksum(p)
		if !bytes.Equal(p, was) {
			t.Errorf("%x changed to %x", was, p)
		}
	}
	p := build(src6, dst6, payload, true)
	if n := testing.AllocsPerRun(100, func() { udpZeroChecksum(p) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
