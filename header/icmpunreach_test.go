package header

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// TestUnreachableAndParamProblem: the destination unreachable and
// parameter problem builders write the type, code and bytes 4-7 their
// RFCs give (RFC 792: parameter problem's pointer in the high byte; RFC
// 4443 §3.1, §3.4: a 32-bit pointer), quote the offending packet whole,
// set valid checksums, and follow RFC 4443 §2.4(e) for a multicast
// destination: only parameter problem code 2 answers one.
func TestUnreachableAndParamProblem(t *testing.T) {
	p4 := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, options: []byte{7, 3, 3, 0}, payload: udp([]byte("hi"))})
	p6 := mkIPv6(ProtoUDP, -1, udp([]byte("hi")))
	m6 := bytes.Clone(p6)
	m6[24] = 0xff // ff..: a multicast destination
	var b [ICMPv6ErrorMaxLen]byte
	for _, c := range []struct {
		name      string
		put       func() (int, Reason)
		offending []byte
		typ, code uint8
		word      uint32
		want      Reason
	}{
		{"v4 host unreachable", func() (int, Reason) { return PutICMPv4HostUnreachable(b[:], gw4, p4) }, p4, 3, 1, 0, OK},
		{"v4 parameter problem", func() (int, Reason) { return PutICMPv4ParamProblem(b[:], gw4, p4, 22) }, p4, 12, 0, 22 << 24, OK},
		{"v6 address unreachable", func() (int, Reason) { return PutICMPv6AddrUnreachable(b[:], gw6, p6) }, p6, 1, 3, 0, OK},
		{"v6 beyond scope", func() (int, Reason) { return PutICMPv6BeyondScope(b[:], gw6, p6) }, p6, 1, 2, 0, OK},
		{"v6 beyond scope, multicast destination", func() (int, Reason) { return PutICMPv6BeyondScope(b[:], gw6, m6) }, m6, 0, 0, 0, ReasonICMPNotAllowed},
		{"v6 parameter problem code 2", func() (int, Reason) { return PutICMPv6ParamProblem(b[:], gw6, p6, 2, 42) }, p6, 4, 2, 42, OK},
		{"v6 address unreachable, multicast destination", func() (int, Reason) { return PutICMPv6AddrUnreachable(b[:], gw6, m6) }, m6, 0, 0, 0, ReasonICMPNotAllowed},
		{"v6 parameter problem code 0, multicast destination", func() (int, Reason) { return PutICMPv6ParamProblem(b[:], gw6, m6, 0, 42) }, m6, 0, 0, 0, ReasonICMPNotAllowed},
		{"v6 parameter problem code 2, multicast destination", func() (int, Reason) { return PutICMPv6ParamProblem(b[:], gw6, m6, 2, 42) }, m6, 4, 2, 42, OK},
	} {
		clear(b[:])
		n, r := c.put()
		if r != c.want {
			t.Errorf("%s: reason %v, want %v", c.name, r, c.want)
			continue
		}
		if r != OK {
			continue
		}
		var m []byte
		var sumOK bool
		if c.offending[0]>>4 == IPv4Version {
			m = b[IPv4MinLen:n]
			sumOK = ICMPv4(m).VerifyChecksum() && FoldChecksum(Checksum(b[:IPv4MinLen], 0)) == 0xffff
		} else {
			m = b[IPv6Len:n]
			src, dst := netip.AddrFrom16(gw6), netip.AddrFrom16(IPv6(c.offending).SrcBytes())
			sumOK = ICMPv6(m).VerifyChecksum(PseudoHeaderChecksum(ProtoICMPv6, src, dst, len(m)))
		}
		if m[0] != c.typ || m[1] != c.code || binary.BigEndian.Uint32(m[4:8]) != c.word || !bytes.Equal(m[8:], c.offending) || !sumOK {
			t.Errorf("%s: type %d code %d word %#x quote %x checksums %v; want %d %d %#x %x true", c.name, m[0], m[1], binary.BigEndian.Uint32(m[4:8]), m[8:], sumOK, c.typ, c.code, c.word, c.offending)
		}
	}
}
