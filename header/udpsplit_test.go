package header

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"
)

// TestSplitIPv4 holds UDPv4Source.Put to PutIPv4With of the template it
// was split from, byte for byte, over random sources, destinations,
// lengths, identifications and ECN bits; the sources of two flows from
// one source are equal, those of different sources are not.
func TestSplitIPv4(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randMAC := func() (m MAC) {
		for i := range m {
			m[i] = byte(r.Uint32())
		}
		return m
	}
	randAddr := func() netip.Addr {
		return netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	}
	for range 2000 {
		c := UDPTemplateConfig{Src: randMAC(), VLANID: -1, SrcAddr: randAddr(), TOS: byte(r.Uint32()), TTL: byte(r.Uint32()), DontFragment: r.IntN(2) == 0}
		var srcs [2]UDPv4Source
		for k := range srcs {
			c.Dst, c.DstAddr, c.DstPort = randMAC(), randAddr(), uint16(r.Uint32())
			tm, ok := NewUDPTemplate(c)
			if !ok {
				t.Fatalf("NewUDPTemplate(%+v) = false", c)
			}
			s, d, ok := tm.SplitIPv4()
			if !ok {
				t.Fatalf("SplitIPv4 of %+v = false", c)
			}
			if s.SrcAddr() != c.SrcAddr {
				t.Fatalf("SrcAddr = %v, want %v", s.SrcAddr(), c.SrcAddr)
			}
			srcs[k] = s
			for range 8 {
				plen := r.IntN(65535 - 28 + 1)
				if r.IntN(2) == 0 {
					plen = r.IntN(1500)
				}
				id, ecn, sport := uint16(r.Uint32()), uint8(r.IntN(4)), uint16(r.Uint32())
				got, want := make([]byte, 42+plen), make([]byte, 42+plen)
				s.Put(got, &d, sport, plen, id, ecn)
				tm.PutIPv4With(want, sport, plen, id, ecn)
				if !bytes.Equal(got, want) {
					t.Fatalf("%+v, payload %d, id %#x, ECN %d:\n got % x\nwant % x", c, plen, id, ecn, got[:42], want[:42])
				}
			}
		}
		if srcs[0] != srcs[1] {
			t.Fatalf("two flows of %+v: sources differ", c)
		}
		other := c
		switch r.IntN(5) {
		case 0:
			other.Src[r.IntN(6)]++
		case 1:
			other.SrcAddr = netip.AddrFrom4([4]byte(append([]byte{c.SrcAddr.As4()[0] + 1}, c.SrcAddr.AsSlice()[1:]...)))
		case 2:
			other.TOS++
		case 3:
			other.TTL++
		case 4:
			other.DontFragment = !other.DontFragment
		}
		tm, _ := NewUDPTemplate(other)
		if s, _, _ := tm.SplitIPv4(); s == srcs[0] {
			t.Fatalf("%+v and %+v: sources equal", c, other)
		}
	}
}

// TestSplitIPv4Others: tagged, UDP-checksummed and IPv6 templates do not
// split.
func TestSplitIPv4Others(t *testing.T) {
	for _, c := range []UDPTemplateConfig{
		{Dst: macB, Src: macA, VLANID: 100, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1},
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1, UDPChecksumIPv4: true},
		{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom16(ip6A), DstAddr: netip.AddrFrom16(ip6B), DstPort: 1},
	} {
		tm, ok := NewUDPTemplate(c)
		if !ok {
			t.Fatalf("NewUDPTemplate(%+v) = false", c)
		}
		if _, _, ok := tm.SplitIPv4(); ok {
			t.Errorf("SplitIPv4 of %+v = true", c)
		}
	}
	if s, a := unsafe.Sizeof(UDPv4Dst{}), unsafe.Alignof(UDPv4Dst{}); s != 12 || a != 1 {
		t.Errorf("UDPv4Dst: %d bytes, alignment %d; the fast path packs it at 12 and 1", s, a)
	}
}

func TestSplitIPv4Allocs(t *testing.T) {
	tm, _ := NewUDPTemplate(UDPTemplateConfig{Dst: macB, Src: macA, VLANID: -1, SrcAddr: netip.AddrFrom4(ip4A), DstAddr: netip.AddrFrom4(ip4B), DstPort: 1})
	s, d, _ := tm.SplitIPv4()
	b := make([]byte, 100)
	if n := testing.AllocsPerRun(100, func() { s.Put(b, &d, 1, 58, 7, 2) }); n != 0 {
		t.Errorf("Put: %v allocations", n)
	}
}
