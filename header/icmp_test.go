package header

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

var (
	gw4 = [4]byte{198, 18, 0, 254}
	gw6 = netip.MustParseAddr("2001:2::fe").As16()
)

// TestICMPv4ErrorHeader: an ICMPv4 error's IP header keeps the offending
// packet's TOS bits beside precedence 0xc0, as Linux's __icmp_send
// (RT_TOS(tos) | IPTOS_PREC_INTERNETCONTROL: TOS 0xb9 gives 0xd8, 0x28
// 0xc8; it was 0xc0 always), and each error a new identification (DF
// clear, it may be fragmented: RFC 6864 §4; it was 0 always).
func TestICMPv4ErrorHeader(t *testing.T) {
	seen := map[uint16]bool{}
	for _, tc := range []struct{ tos, want uint8 }{{0xb9, 0xd8}, {0x28, 0xc8}, {0x02, 0xc2}, {0, 0xc0}, {0xff, 0xde}} {
		p := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp([]byte("hi"))})
		p[1] = tc.tos
		binary.BigEndian.PutUint16(p[10:12], 0)
		binary.BigEndian.PutUint16(p[10:12], ^uint16(slowChecksum(p[:20], 0)))
		b := make([]byte, 1500)
		for _, put := range []func() (int, Reason){
			func() (int, Reason) { return PutICMPv4FragNeeded(b, gw4, p, 1420) },
			func() (int, Reason) { return PutICMPv4TimeExceeded(b, gw4, p) },
			func() (int, Reason) { return PutICMPv4HostUnreachable(b, gw4, p) },
		} {
			n, r := put()
			if r != OK {
				t.Fatalf("TOS %#x: %v", tc.tos, r)
			}
			h := IPv4(b[:n])
			if h.TOS() != tc.want || !h.VerifyChecksum() || h.DontFragment() {
				t.Errorf("about TOS %#x: error TOS %#x DF %v checksum ok %v, want %#x, clear, true", tc.tos, h.TOS(), h.DontFragment(), h.VerifyChecksum(), tc.want)
			}
			if seen[h.ID()] {
				t.Errorf("error ID %d again", h.ID())
			}
			seen[h.ID()] = true
		}
	}
}

func TestPutICMPv4FragNeeded(t *testing.T) {
	big := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp(make([]byte, 1472-8))}) // 1500 bytes
	small := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp([]byte("hi"))})       // 30 bytes
	opts := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, options: bytes.Repeat([]byte{1}, 40), payload: udp(make([]byte, 1400))})
	echo := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4, payload: append([]byte{8, 0, 0, 0, 0, 1, 0, 1}, make([]byte, 1400)...)})
	errMsg := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4, payload: append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, small...)})
	unknown19 := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4, payload: []byte{19, 0, 0, 0, 0, 0, 0, 0}})
	unknown200 := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4, payload: []byte{200, 0, 0, 0, 0, 0, 0, 0}})
	type18 := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4, payload: []byte{18, 0, 0, 0, 0, 0, 0, 0}})
	noType := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoICMPv4})
	nonFirst := mkIPv4(ip4Spec{flagFrag: 0x4000 | 100, proto: ProtoUDP, payload: make([]byte, 1400)})
	firstFrag := mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: udp(make([]byte, 1400))})
	withDst := func(p []byte, off int, a [4]byte) []byte {
		p = bytes.Clone(p)
		copy(p[off:], a[:])
		binary.BigEndian.PutUint16(p[10:12], 0)
		binary.BigEndian.PutUint16(p[10:12], ^uint16(slowChecksum(p[:20], 0)))
		return p
	}
	tests := []struct {
		name      string
		offending []byte
		bufLen    int
		want      Reason
		wantQuote int
	}{
		{"1500 bytes quotes to 576", big, 1500, OK, 548},
		{"small quoted whole", small, 1500, OK, 30},
		{"padding not quoted", cat(small, make([]byte, 16)), 1500, OK, 30},
		{"options", opts, 1500, OK, 548},
		{"echo request", echo, 1500, OK, 548},
		{"first fragment", firstFrag, 1500, OK, 548},
		{"short buffer quotes less", big, 100, OK, 72},
		{"buffer for header and 8 bytes", opts, 28 + 60 + 8, OK, 68},
		{"buffer too small", opts, 28 + 60 + 7, ReasonBufferTooSmall, 0},
		{"about an icmp error", errMsg, 1500, ReasonICMPNotAllowed, 0},
		// Linux's __icmp_send takes an ICMP type past NR_ICMP_TYPES (18)
		// for an error, and an ICMP packet without its type octet too
		// (checked on Linux 6.18: TTL 1 through a router, types 19, 42
		// and 200 get no time exceeded, 17 and 18 do).
		{"about icmp type 19", unknown19, 1500, ReasonICMPNotAllowed, 0},
		{"about icmp type 200", unknown200, 1500, ReasonICMPNotAllowed, 0},
		{"about icmp type 18", type18, 1500, OK, 28},
		{"about icmp without a type", noType, 1500, ReasonICMPNotAllowed, 0},
		{"non-first fragment", nonFirst, 1500, ReasonICMPNotAllowed, 0},
		{"multicast destination", withDst(big, 16, [4]byte{224, 0, 0, 1}), 1500, ReasonICMPNotAllowed, 0},
		{"broadcast destination", withDst(big, 16, [4]byte{255, 255, 255, 255}), 1500, ReasonICMPNotAllowed, 0},
		{"unspecified source", withDst(big, 12, [4]byte{}), 1500, ReasonICMPNotAllowed, 0},
		{"loopback source", withDst(big, 12, [4]byte{127, 0, 0, 1}), 1500, ReasonICMPNotAllowed, 0},
		{"truncated", big[:19], 1500, ReasonTruncatedIP, 0},
		{"ipv6", mkIPv6(ProtoUDP, -1, udp(nil)), 1500, ReasonBadVersion, 0},
		{"bad ihl", func() []byte { p := bytes.Clone(small); p[0] = 0x44; return p }(), 1500, ReasonBadIHL, 0},
		{"bad total length", func() []byte { p := bytes.Clone(small); p[2], p[3] = 0, 10; return p }(), 1500, ReasonBadTotalLength, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, tt.bufLen)
			n, r := PutICMPv4FragNeeded(b, gw4, tt.offending, 1420)
			if r != tt.want {
				t.Fatalf("PutICMPv4FragNeeded() = %d, %v, want %v", n, r, tt.want)
			}
			if r != OK {
				if n != 0 {
					t.Errorf("PutICMPv4FragNeeded() = %d, %v, want 0", n, r)
				}
				return
			}
			if want := 28 + tt.wantQuote; n != want {
				t.Fatalf("PutICMPv4FragNeeded() = %d, want %d", n, want)
			}
			reply := b[:n]
			h := IPv4(reply)
			if h.Src() != netip.AddrFrom4(gw4) || h.Dst() != netip.AddrFrom4(IPv4(tt.offending).SrcBytes()) || h.Protocol() != ProtoICMPv4 ||
				h.TotalLength() != n || !h.VerifyChecksum() || h.IsFragment() || h.TTL() != 64 {
				t.Errorf("reply IPv4 header %x: src %v dst %v proto %d len %d", reply[:20], h.Src(), h.Dst(), h.Protocol(), h.TotalLength())
			}
			m := ICMPv4(reply[20:])
			if m.Type() != 3 || m.Code() != 4 || m.NextHopMTU() != 1420 || !m.VerifyChecksum() {
				t.Errorf("reply ICMP %x: type %d code %d mtu %d checksum ok %v, want 3 4 1420 true", reply[20:28], m.Type(), m.Code(), m.NextHopMTU(), m.VerifyChecksum())
			}
			if s := FoldChecksum(slowChecksum(reply[20:], 0)); s != 0xffff {
				t.Errorf("reply ICMP slow checksum sum = %#04x, want 0xffff", s)
			}
			if !bytes.Equal(reply[28:], tt.offending[:tt.wantQuote]) {
				t.Errorf("reply quotes %x, want %x", reply[28:], tt.offending[:tt.wantQuote])
			}
			// x/net/icmp parses it as destination unreachable with the
			// quote as data.
			msg, err := icmp.ParseMessage(1, reply[20:])
			if err != nil {
				t.Fatalf("icmp.ParseMessage: %v", err)
			}
			if msg.Type != ipv4.ICMPTypeDestinationUnreachable || msg.Code != 4 {
				t.Errorf("icmp.ParseMessage type %v code %d, want destination unreachable 4", msg.Type, msg.Code)
			}
			var p Packet
			if r := ParseIP(reply, &p); r != OK || p.PayloadLen != tt.wantQuote {
				t.Errorf("ParseIP(reply) = %v, payload %d, want ok, %d", r, p.PayloadLen, tt.wantQuote)
			}
		})
	}
}

func TestPutICMPv6PacketTooBig(t *testing.T) {
	big := mkIPv6(ProtoUDP, -1, udp(make([]byte, 1452))) // 1500 bytes
	small := mkIPv6(ProtoUDP, -1, udp([]byte("hi")))     // 50 bytes
	echo := mkIPv6(ProtoICMPv6, -1, append([]byte{128, 0, 0, 0, 0, 1, 0, 1}, make([]byte, 1400)...))
	errMsg := mkIPv6(ProtoDstOpts, -1, cat(ext(ProtoICMPv6, 0), []byte{1, 4, 0, 0, 0, 0, 0, 0}, small))
	errFirstFrag := mkIPv6(ProtoFragment, -1, cat([]byte{ProtoICMPv6, 0, 0, 1, 0, 0, 0, 1}, []byte{1, 4, 0, 0, 0, 0, 0, 0}, small))
	typelessFirstFrag := mkIPv6(ProtoFragment, -1, []byte{ProtoICMPv6, 0, 0, 1, 0, 0, 0, 1})
	nonFirstFrag := mkIPv6(ProtoFragment, -1, cat([]byte{ProtoICMPv6, 0, 0, 0x41, 0, 0, 0, 1}, []byte{1, 4, 0, 0, 0, 0, 0, 0}))
	typeless := mkIPv6(ProtoICMPv6, -1, nil)
	with := func(p []byte, off int, a string) []byte {
		p = bytes.Clone(p)
		x := netip.MustParseAddr(a).As16()
		copy(p[off:], x[:])
		return p
	}
	tests := []struct {
		name      string
		offending []byte
		bufLen    int
		want      Reason
		wantQuote int
	}{
		{"1500 bytes quotes to 1280", big, 1500, OK, 1232},
		{"small quoted whole", small, 1500, OK, 50},
		{"padding not quoted", cat(small, make([]byte, 10)), 1500, OK, 50},
		{"echo request", echo, 1500, OK, 1232},
		{"multicast destination allowed", with(big, 24, "ff02::1"), 1500, OK, 1232},
		{"short buffer quotes less", big, 200, OK, 152},
		{"buffer too small", big, 48 + 39, ReasonBufferTooSmall, 0},
		{"about an icmpv6 error", errMsg, 1500, ReasonICMPNotAllowed, 0},
		// Linux's is_ineligible (net/ipv6/icmp.c) reads the ICMPv6 type
		// of a first fragment too, and takes an ICMPv6 packet without its
		// type octet for an error unless it is a fragment (checked on
		// Linux 6.18: hop limit 1 through a router).
		{"first fragment of an icmpv6 error", errFirstFrag, 1500, ReasonICMPNotAllowed, 0},
		{"icmpv6 without a type", typeless, 1500, ReasonICMPNotAllowed, 0},
		{"first fragment without a type", typelessFirstFrag, 1500, OK, 48},
		{"non-first fragment", nonFirstFrag, 1500, OK, 56},
		{"multicast source", with(big, 8, "ff02::1"), 1500, ReasonICMPNotAllowed, 0},
		{"unspecified source", with(big, 8, "::"), 1500, ReasonICMPNotAllowed, 0},
		{"truncated", big[:39], 1500, ReasonTruncatedIP, 0},
		{"ipv4", mkIPv4(ip4Spec{proto: ProtoUDP, payload: make([]byte, 40)}), 1500, ReasonBadVersion, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, tt.bufLen)
			n, r := PutICMPv6PacketTooBig(b, gw6, tt.offending, 1420)
			if r != tt.want {
				t.Fatalf("PutICMPv6PacketTooBig() = %d, %v, want %v", n, r, tt.want)
			}
			if r != OK {
				return
			}
			if want := 48 + tt.wantQuote; n != want {
				t.Fatalf("PutICMPv6PacketTooBig() = %d, want %d", n, want)
			}
			reply := b[:n]
			h := IPv6(reply)
			osrc := IPv6(tt.offending).SrcBytes()
			if h.Src() != netip.AddrFrom16(gw6) || h.DstBytes() != osrc || h.NextHeader() != ProtoICMPv6 || h.PayloadLength() != n-40 {
				t.Errorf("reply IPv6 header %x", reply[:40])
			}
			m := ICMPv6(reply[40:])
			ps := PseudoHeaderChecksumBytes(ProtoICMPv6, gw6[:], osrc[:], len(m))
			if m.Type() != 2 || m.Code() != 0 || m.MTU() != 1420 || !m.VerifyChecksum(ps) {
				t.Errorf("reply ICMPv6 %x: type %d code %d mtu %d checksum ok %v", reply[40:48], m.Type(), m.Code(), m.MTU(), m.VerifyChecksum(ps))
			}
			if !bytes.Equal(reply[48:], tt.offending[:tt.wantQuote]) {
				t.Errorf("reply quotes %x, want %x", reply[48:], tt.offending[:tt.wantQuote])
			}
			// golang.org/x/net/icmp marshals the same message with its
			// own checksum code: the bytes must match.
			ref := icmp.Message{Type: ipv6.ICMPTypePacketTooBig, Body: &icmp.PacketTooBig{MTU: 1420, Data: tt.offending[:tt.wantQuote]}}
			want, err := ref.Marshal(icmp.IPv6PseudoHeader(net.IP(gw6[:]), net.IP(osrc[:])))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(reply[40:], want) {
				t.Errorf("reply ICMPv6 = %x..., x/net/icmp marshals %x...", reply[40:48], want[:8])
			}
			var p Packet
			if r := ParseIP(reply, &p); r != OK || p.Proto != ProtoICMPv6 {
				t.Errorf("ParseIP(reply) = %v, proto %d, want ok, 58", r, p.Proto)
			}
		})
	}
}

// TestICMPv6ErrorFlowLabel: an ICMPv6 error carries a flow label (RFC
// 6437 §3, as Linux labels its errors), the same for every error between
// two addresses and never 0; it was 0 always. Writing one allocates
// nothing.
func TestICMPv6ErrorFlowLabel(t *testing.T) {
	offending := mkIPv6(ProtoUDP, -1, udp([]byte("hi")))
	src := netip.MustParseAddr("2001:db8:1::1").As16()
	label := func(src [16]byte, off []byte) uint32 {
		t.Helper()
		b := make([]byte, 1500)
		n, r := PutICMPv6PacketTooBig(b, src, off, 1280)
		if r != OK {
			t.Fatalf("PutICMPv6PacketTooBig = %v", r)
		}
		return IPv6(b[:n]).FlowLabel()
	}
	l := label(src, offending)
	if l == 0 || label(src, offending) != l {
		t.Fatalf("flow labels %#x and %#x for the same addresses, want one nonzero label", l, label(src, offending))
	}
	// Other sources give other labels (a 20-bit hash: one chance in a
	// million that one pair collides, none that all 8 do).
	same := 0
	for i := range 8 {
		s := src
		s[15] = byte(2 + i)
		if label(s, offending) == l {
			same++
		}
	}
	if same == 8 {
		t.Errorf("8 other sources all got label %#x", l)
	}
	b := make([]byte, 1500)
	if a := testing.AllocsPerRun(100, func() { PutICMPv6PacketTooBig(b, src, offending, 1280) }); a != 0 {
		t.Errorf("PutICMPv6PacketTooBig allocates %v times", a)
	}
}
