package header

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"
)

// TestUDPTemplate compares UDPTemplate.Put with the step-by-step builders
// and checks the result with Parse and the slow checksum.
func TestUDPTemplate(t *testing.T) {
	configs := []UDPTemplateConfig{
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 51820, DontFragment: true},
		{Dst: macB, Src: macA, VLANID: 100, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4([4]byte{255, 255, 255, 255}), DstPort: 0xffff, TOS: 0xff, TTL: 255, UDPChecksumIPv4: true},
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom16(ip6A), DstAddr: netip.AddrFrom16(ip6B), DstPort: 51820, TOS: 0xb8},
		{Dst: macB, Src: macA, VLANID: 4095, SrcAddr: netip.MustParseAddr("::ffff:198.18.0.1"), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1}, // mapped: IPv4
	}
	for i, c := range configs {
		tm, ok := NewUDPTemplate(c)
		if !ok {
			t.Fatalf("NewUDPTemplate(%d) = false", i)
		}
		src, dst := c.SrcAddr.Unmap(), c.DstAddr.Unmap()
		for _, plen := range []int{0, 1, 32, 1421, 1452} {
			for _, sport := range []uint16{0, 51820, 0xffff} {
				pl := make([]byte, plen)
				for j := range pl {
					pl[j] = byte(j*7 + int(sport))
				}
				got := make([]byte, tm.Len()+plen)
				copy(got[tm.Len():], pl)
				if n := tm.Put(got, sport, plen); n != tm.Len() {
					t.Fatalf("Put() = %d, want %d", n, tm.Len())
				}
				want := make([]byte, len(got))
				var n int
				et := uint16(EtherTypeIPv4)
				if src.Is6() {
					et = EtherTypeIPv6
				}
				if c.VLANID >= 0 {
					n = PutEthernetVLAN(want, c.Dst, c.Src, uint16(c.VLANID), et)
				} else {
					n = PutEthernet(want, c.Dst, c.Src, et)
				}
				if src.Is6() {
					n += PutIPv6(want[n:], &IPv6Fields{TrafficClass: c.TOS, NextHeader: ProtoUDP, HopLimit: c.TTL, Src: src.As16(), Dst: dst.As16()}, UDPLen+plen)
				} else {
					n += PutIPv4(want[n:], &IPv4Fields{TOS: c.TOS, TTL: c.TTL, Protocol: ProtoUDP, DontFragment: c.DontFragment, Src: src.As4(), Dst: dst.As4()}, UDPLen+plen)
				}
				PutUDP(want[n:], sport, c.DstPort, plen)
				copy(want[n+UDPLen:], pl)
				if src.Is6() || c.UDPChecksumIPv4 {
					u := UDP(want[n:])
					// The slow reference, not ComputeChecksum.
					cs := ^uint16(slowChecksum(u, slowPseudo(ProtoUDP, src, dst, len(u))))
					if cs == 0 {
						cs = 0xffff
					}
					u[6], u[7] = byte(cs>>8), byte(cs)
				}
				if !bytes.Equal(got[:tm.Len()], want[:tm.Len()]) {
					t.Errorf("template %d Put(%d, %d) =\n%x, want\n%x", i, sport, plen, got[:tm.Len()], want[:tm.Len()])
				}
				var p Packet
				if r := Parse(got, &p); r != OK || p.PayloadLen != plen || p.SrcPort != sport || p.Src != src || p.Dst != dst {
					t.Errorf("Parse(template %d Put(%d, %d)) = %v %+v", i, sport, plen, r, p)
				}
			}
		}
	}
	if _, ok := NewUDPTemplate(UDPTemplateConfig{SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom16(ip6B)}); ok {
		t.Errorf("NewUDPTemplate(mixed families) = true, want false")
	}
	if _, ok := NewUDPTemplate(UDPTemplateConfig{}); ok {
		t.Errorf("NewUDPTemplate(zero addresses) = true, want false")
	}
}

// TestUDPTemplateIPv4Line checks that what Put reads of an IPv4 template,
// tagged or not (the lengths and flags, then up to 46 bytes of headers),
// lies in the first 64 bytes of a UDPTemplate: one cache line when the
// template starts on one, as in a fast-path worker's state per peer.
func TestUDPTemplateIPv4Line(t *testing.T) {
	var tm UDPTemplate
	if end := unsafe.Offsetof(tm.hdr) + EthernetVLANLen + IPv4MinLen + UDPLen; end > 64 {
		t.Errorf("an IPv4 template's headers end at byte %d, past the first 64", end)
	}
	for _, off := range []uintptr{unsafe.Offsetof(tm.sum), unsafe.Offsetof(tm.n), unsafe.Offsetof(tm.l3),
		unsafe.Offsetof(tm.l4), unsafe.Offsetof(tm.v6), unsafe.Offsetof(tm.udp4cs)} {
		if off >= unsafe.Offsetof(tm.hdr) {
			t.Errorf("a length or flag at byte %d, after the header bytes", off)
		}
	}
}

// TestUDPTemplatePutIPv4With holds PutIPv4With to Put followed by the
// identification, the ECN bits and an incremental update of the header
// checksum (RFC 1624 eqn. 3), byte for byte, and to a header Parse
// accepts; for the templates it is not for it writes nothing.
func TestUDPTemplatePutIPv4With(t *testing.T) {
	c := UDPTemplateConfig{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 51820}
	tm, ok := NewUDPTemplate(c)
	if !ok {
		t.Fatal("NewUDPTemplate = false")
	}
	for _, plen := range []int{0, 1, 32, 1421, 1452, 65535 - 28} {
		for _, id := range []uint16{0, 1, 0x7fff, 0xfffe, 0xffff} {
			for ecn := range uint8(4) {
				for _, sport := range []uint16{0, 51820, 0xffff} {
					got := make([]byte, 42+plen)
					want := make([]byte, 42+plen)
					if !tm.PutIPv4With(got, sport, plen, id, ecn) {
						t.Fatal("PutIPv4With = false for an untagged IPv4 template")
					}
					tm.Put(want, sport, plen)
					ip := want[EthernetLen:]
					ip[1] = ecn
					binary.BigEndian.PutUint16(ip[4:6], id)
					s := uint32(^binary.BigEndian.Uint16(ip[10:12])) + uint32(id) + uint32(ecn)
					binary.BigEndian.PutUint16(ip[10:12], ^FoldChecksum(s))
					if !bytes.Equal(got, want) {
						t.Fatalf("payload %d, id %#x, ECN %d, port %d:\n got % x\nwant % x", plen, id, ecn, sport, got[:42], want[:42])
					}
					var p Packet
					if plen < 65535-28 {
						if r := Parse(got, &p); r != OK {
							t.Fatalf("payload %d, id %#x, ECN %d: Parse = %v", plen, id, ecn, r)
						}
					}
					if !ipv4HeaderSumOK(got[EthernetLen : EthernetLen+IPv4MinLen]) {
						t.Fatalf("payload %d, id %#x, ECN %d: bad header checksum", plen, id, ecn)
					}
				}
			}
		}
	}
	for _, c := range []UDPTemplateConfig{
		{Dst: macB, Src: macA, VLANID: 100, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1},
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1, UDPChecksumIPv4: true},
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom16(ip6A), DstAddr: netip.AddrFrom16(ip6B), DstPort: 1},
	} {
		tm, _ := NewUDPTemplate(c)
		b := make([]byte, 100)
		if tm.PutIPv4With(b, 1, 32, 1, 1) || !bytes.Equal(b, make([]byte, 100)) {
			t.Errorf("PutIPv4With on %+v = true or wrote", c)
		}
	}
}
