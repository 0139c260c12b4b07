package header

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func TestPutEthernet(t *testing.T) {
	b := make([]byte, EthernetVLANLen)
	if n := PutEthernet(b, macB, macA, EtherTypeIPv6); n != EthernetLen {
		t.Fatalf("PutEthernet() = %d, want %d", n, EthernetLen)
	}
	if want := ethHdr(-1, EtherTypeIPv6); !bytes.Equal(b[:EthernetLen], want) {
		t.Errorf("PutEthernet() wrote %x, want %x", b[:EthernetLen], want)
	}
	e := Ethernet(b)
	if e.Dst() != macB || e.Src() != macA || e.EtherType() != EtherTypeIPv6 || e.Tagged() || e.HeaderLen() != EthernetLen || e.VLANID() != 0 {
		t.Errorf("Ethernet(%x) = dst %v src %v type %#x tagged %v len %d", b, e.Dst(), e.Src(), e.EtherType(), e.Tagged(), e.HeaderLen())
	}
	if n := PutEthernetVLAN(b, macB, macA, 0xf123, EtherTypeIPv4); n != EthernetVLANLen {
		t.Fatalf("PutEthernetVLAN() = %d, want %d", n, EthernetVLANLen)
	}
	want := ethHdr(0x123, EtherTypeIPv4)
	want[14] &^= 0xe0 // PutEthernetVLAN writes PCP 0
	if !bytes.Equal(b, want) {
		t.Errorf("PutEthernetVLAN() wrote %x, want %x", b, want)
	}
	if e.VLANID() != 0x123 || e.EtherType() != EtherTypeIPv4 || !e.Tagged() || e.HeaderLen() != EthernetVLANLen {
		t.Errorf("Ethernet(%x) = vlan %#x type %#x tagged %v len %d", b, e.VLANID(), e.EtherType(), e.Tagged(), e.HeaderLen())
	}
}

func TestMAC(t *testing.T) {
	tests := []struct {
		m               MAC
		str             string
		mcast, bc, zero bool
	}{
		{MAC{0x02, 0xab, 0, 0, 0, 0x0f}, "02:ab:00:00:00:0f", false, false, false},
		{BroadcastMAC, "ff:ff:ff:ff:ff:ff", true, true, false},
		{MAC{0x33, 0x33, 0, 0, 0, 1}, "33:33:00:00:00:01", true, false, false},
		{MAC{}, "00:00:00:00:00:00", false, false, true},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.str {
			t.Errorf("MAC.String() = %q, want %q", got, tt.str)
		}
		if got := tt.m.String(); got != net.HardwareAddr(tt.m[:]).String() {
			t.Errorf("MAC.String() = %q, want net.HardwareAddr's %q", got, net.HardwareAddr(tt.m[:]))
		}
		if tt.m.IsMulticast() != tt.mcast || tt.m.IsBroadcast() != tt.bc || tt.m.IsZero() != tt.zero {
			t.Errorf("MAC(%v) multicast, broadcast, zero = %v %v %v, want %v %v %v", tt.m, tt.m.IsMulticast(), tt.m.IsBroadcast(), tt.m.IsZero(), tt.mcast, tt.bc, tt.zero)
		}
	}
	// RFC 2464 §7: 33:33 and the last four bytes.
	if got, want := MulticastMACIPv6(netip.MustParseAddr("ff02::1:ff12:3456")), (MAC{0x33, 0x33, 0xff, 0x12, 0x34, 0x56}); got != want {
		t.Errorf("MulticastMACIPv6(ff02::1:ff12:3456) = %v, want %v", got, want)
	}
}

// TestPutIPv4 compares PutIPv4 with golang.org/x/net/ipv4's marshalling
// (an independent encoder) and the checksum with slowChecksum.
func TestPutIPv4(t *testing.T) {
	tests := []IPv4Fields{
		{TOS: 0xb8, TTL: 17, Protocol: ProtoUDP, ID: 0xbeef, DontFragment: true, Src: ip4A, Dst: ip4B},
		{Protocol: ProtoTCP, Src: [4]byte{255, 255, 255, 255}, Dst: [4]byte{255, 255, 255, 255}, TTL: 255, TOS: 0xff, ID: 0xffff, DontFragment: true},
		{Protocol: ProtoICMPv4}, // zero TTL: the default 64
	}
	for _, f := range tests {
		for _, plen := range []int{0, 8, 1472, 65515} {
			b := make([]byte, IPv4MinLen)
			if n := PutIPv4(b, &f, plen); n != IPv4MinLen {
				t.Fatalf("PutIPv4(%+v, %d) = %d, want %d", f, plen, n, IPv4MinLen)
			}
			ttl := int(f.TTL)
			if ttl == 0 {
				ttl = 64
			}
			ref := &ipv4.Header{Version: 4, Len: 20, TOS: int(f.TOS), TotalLen: 20 + plen, ID: int(f.ID), TTL: ttl,
				Protocol: int(f.Protocol), Src: net.IP(f.Src[:]), Dst: net.IP(f.Dst[:])}
			if f.DontFragment {
				ref.Flags = ipv4.DontFragment
			}
			want, err := ref.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			// x/net marshals TotalLen in host order on some BSDs only;
			// on Linux it is network order. It leaves the checksum
			// to the caller: compute it with the slow reference.
			binary.BigEndian.PutUint16(want[10:12], ^uint16(slowChecksum(want, 0)))
			if !bytes.Equal(b, want) {
				t.Errorf("PutIPv4(%+v, %d) wrote\n%x, want\n%x", f, plen, b, want)
			}
			h := IPv4(b)
			if !h.VerifyChecksum() || h.ComputeChecksum() != h.Checksum() {
				t.Errorf("IPv4(%x).VerifyChecksum() = false", b)
			}
			got, err := ipv4.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Version() != uint8(got.Version) || h.HeaderLen() != got.Len || h.TOS() != uint8(got.TOS) || h.TotalLength() != got.TotalLen ||
				h.ID() != uint16(got.ID) || h.TTL() != uint8(got.TTL) || h.Protocol() != uint8(got.Protocol) ||
				h.Checksum() != uint16(got.Checksum) || !got.Src.Equal(h.Src().AsSlice()) || !got.Dst.Equal(h.Dst().AsSlice()) ||
				h.DontFragment() != (got.Flags&ipv4.DontFragment != 0) || h.IsFragment() || h.FragmentOffset() != got.FragOff*8 {
				t.Errorf("IPv4 view of %x disagrees with ipv4.ParseHeader: %+v", b, got)
			}
		}
	}
}

func TestIPv4Fragments(t *testing.T) {
	tests := []struct {
		flagFrag     uint16
		frag, mf, df bool
		offset       int
	}{
		{0x0000, false, false, false, 0},
		{0x4000, false, false, true, 0},
		{0x2000, true, true, false, 0},
		{0x0001, true, false, false, 8},
		{0x3fff, true, true, false, 0x1fff * 8},
	}
	for _, tt := range tests {
		h := IPv4(mkIPv4(ip4Spec{flagFrag: tt.flagFrag, proto: ProtoUDP}))
		if h.IsFragment() != tt.frag || h.MoreFragments() != tt.mf || h.DontFragment() != tt.df || h.FragmentOffset() != tt.offset {
			t.Errorf("IPv4 flags %#04x: IsFragment, MF, DF, offset = %v %v %v %d, want %v %v %v %d", tt.flagFrag,
				h.IsFragment(), h.MoreFragments(), h.DontFragment(), h.FragmentOffset(), tt.frag, tt.mf, tt.df, tt.offset)
		}
	}
}

func TestIPv4OptionsAndPayload(t *testing.T) {
	opts := []byte{1, 1, 1, 0}
	b := cat(mkIPv4(ip4Spec{proto: ProtoUDP, options: opts, payload: []byte{9, 9}}), []byte{0xee, 0xee}) // padding
	h := IPv4(b)
	if !bytes.Equal(h.Options(), opts) || !bytes.Equal(h.Payload(), []byte{9, 9}) || !h.VerifyChecksum() {
		t.Errorf("IPv4(%x) options %x payload %x verify %v, want %x, 0909, true", b, h.Options(), h.Payload(), h.VerifyChecksum(), opts)
	}
}

func TestDecrementTTL(t *testing.T) {
	for _, ttl := range []uint8{1, 2, 64, 255} {
		b := mkIPv4(ip4Spec{proto: ProtoUDP, options: []byte{1, 1, 1, 0}})
		b[8] = ttl
		binary.BigEndian.PutUint16(b[10:12], 0)
		binary.BigEndian.PutUint16(b[10:12], ^uint16(slowChecksum(b, 0)))
		h := IPv4(b)
		if got := h.DecrementTTL(); got != ttl-1 || h.TTL() != ttl-1 || !h.VerifyChecksum() {
			t.Errorf("DecrementTTL() from %d = %d (TTL %d, checksum ok %v), want %d", ttl, got, h.TTL(), h.VerifyChecksum(), ttl-1)
		}
	}
	b := mkIPv4(ip4Spec{proto: ProtoUDP})
	b[8] = 0
	if got := IPv4(b).DecrementTTL(); got != 0 || b[8] != 0 {
		t.Errorf("DecrementTTL() from 0 = %d, TTL %d, want 0 0", got, b[8])
	}
}

// TestPutIPv6 compares PutIPv6 with the bytes of RFC 8200 §3 laid out by
// hand and with golang.org/x/net/ipv6.ParseHeader.
func TestPutIPv6(t *testing.T) {
	f := IPv6Fields{TrafficClass: 0xb8, FlowLabel: 0xfabcde, NextHeader: ProtoUDP, HopLimit: 3, Src: ip6A, Dst: ip6B}
	b := make([]byte, IPv6Len)
	if n := PutIPv6(b, &f, 1232); n != IPv6Len {
		t.Fatalf("PutIPv6() = %d, want %d", n, IPv6Len)
	}
	want := cat([]byte{0x6b, 0x8a, 0xbc, 0xde, 0x04, 0xd0, ProtoUDP, 3}, ip6A[:], ip6B[:])
	if !bytes.Equal(b, want) {
		t.Errorf("PutIPv6(%+v) wrote\n%x, want\n%x", f, b, want)
	}
	ref, err := ipv6.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h := IPv6(b)
	if h.Version() != 6 || int(h.TrafficClass()) != ref.TrafficClass || int(h.FlowLabel()) != ref.FlowLabel || h.PayloadLength() != ref.PayloadLen ||
		int(h.NextHeader()) != ref.NextHeader || int(h.HopLimit()) != ref.HopLimit || !ref.Src.Equal(h.Src().AsSlice()) || !ref.Dst.Equal(h.Dst().AsSlice()) ||
		h.SrcBytes() != ip6A || h.DstBytes() != ip6B {
		t.Errorf("IPv6 view of %x disagrees with ipv6.ParseHeader: %+v", b, ref)
	}
	f.HopLimit = 0
	PutIPv6(b, &f, 0)
	if h.HopLimit() != 64 {
		t.Errorf("PutIPv6 with HopLimit 0 wrote hop limit %d, want 64", h.HopLimit())
	}
}

func TestUDPChecksum(t *testing.T) {
	// Known answer: a datagram whose checksum was computed by hand with
	// the RFC 768 pseudo-header through slowChecksum.
	for _, v6 := range []bool{false, true} {
		for _, plen := range []int{0, 1, 10, 1420, 1421} {
			src, dst := netip.AddrFrom4(ip4A), netip.AddrFrom4(ip4B)
			if v6 {
				src, dst = netip.AddrFrom16(ip6A), netip.AddrFrom16(ip6B)
			}
			pl := make([]byte, plen)
			for i := range pl {
				pl[i] = byte(i*31 + 7)
			}
			b := make([]byte, UDPLen+plen)
			if n := PutUDP(b, 51820, 4242, plen); n != UDPLen {
				t.Fatalf("PutUDP() = %d, want %d", n, UDPLen)
			}
			copy(b[UDPLen:], pl)
			u := UDP(b)
			if u.SrcPort() != 51820 || u.DstPort() != 4242 || u.Length() != UDPLen+plen || u.Checksum() != 0 || !bytes.Equal(u.Payload(), pl) {
				t.Fatalf("UDP(%x) = %d %d %d %#x", b, u.SrcPort(), u.DstPort(), u.Length(), u.Checksum())
			}
			want := ^uint16(slowChecksum(b, slowPseudo(ProtoUDP, src, dst, len(b))))
			if want == 0 {
				want = 0xffff
			}
			ps := PseudoHeaderChecksum(ProtoUDP, src, dst, len(b))
			if got := u.ComputeChecksum(ps); got != want {
				t.Errorf("UDP.ComputeChecksum(v6=%v, len %d) = %#04x, want %#04x", v6, plen, got, want)
			}
			u.SetChecksum(ps)
			if !u.VerifyChecksum(ps) {
				t.Errorf("UDP.VerifyChecksum(v6=%v, len %d) = false after SetChecksum", v6, plen)
			}
			b[len(b)-1] ^= 0x40
			if plen > 0 && u.VerifyChecksum(ps) {
				t.Errorf("UDP.VerifyChecksum(v6=%v, len %d) = true after a bit flip", v6, plen)
			}
		}
	}
	// A datagram whose sum is 0 is sent with 0xffff (RFC 768).
	b := make([]byte, 10)
	PutUDP(b, 0, 0, 2)
	// Choose the payload so that the complement of the sum is zero.
	ps := uint32(0)
	s := FoldChecksum(Checksum(b, ps))
	binary.BigEndian.PutUint16(b[8:10], ^s)
	if got := UDP(b).ComputeChecksum(ps); got != 0xffff {
		t.Errorf("UDP.ComputeChecksum(zero sum) = %#04x, want 0xffff", got)
	}
	UDP(b).SetChecksum(ps)
	if !UDP(b).VerifyChecksum(ps) {
		t.Errorf("UDP.VerifyChecksum(0xffff for zero sum) = false, want true")
	}
	binary.BigEndian.PutUint16(b[6:8], 0)
	if UDP(b).VerifyChecksum(ps) {
		t.Errorf("UDP.VerifyChecksum(field 0) = true, want false")
	}
}
