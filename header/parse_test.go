package header

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Test frames are assembled byte by byte here, with slowChecksum, so that
// the code under test is not its own reference.

var (
	macA = MAC{0x02, 0, 0, 0, 0, 0x0a}
	macB = MAC{0x02, 0, 0, 0, 0, 0x0b}
	ip4A = [4]byte{198, 18, 0, 1}
	ip4B = [4]byte{198, 18, 0, 2}
	ip6A = netip.MustParseAddr("2001:2::a").As16()
	ip6B = netip.MustParseAddr("2001:2::b").As16()
)

func ethHdr(vlan int, et uint16) []byte {
	b := append(append([]byte{}, macB[:]...), macA[:]...)
	if vlan >= 0 {
		b = binary.BigEndian.AppendUint16(b, EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, uint16(vlan)|0xe000) // PCP 7 must not leak into the VID
	}
	return binary.BigEndian.AppendUint16(b, et)
}

// ip4Spec describes an IPv4 packet for mkIPv4.
type ip4Spec struct {
	ihl      int // 0: derived from options
	total    int // 0: derived
	flagFrag uint16
	proto    uint8
	options  []byte
	payload  []byte
	badSum   bool
}

func mkIPv4(s ip4Spec) []byte {
	hl := IPv4MinLen + len(s.options)
	ihl := s.ihl
	if ihl == 0 {
		ihl = hl / 4
	}
	total := s.total
	if total == 0 {
		total = hl + len(s.payload)
	}
	b := []byte{0x40 | byte(ihl), 0x00, byte(total >> 8), byte(total), 0x12, 0x34,
		byte(s.flagFrag >> 8), byte(s.flagFrag), 64, s.proto, 0, 0}
	b = append(b, ip4A[:]...)
	b = append(b, ip4B[:]...)
	b = append(b, s.options...)
	c := ^uint16(slowChecksum(b, 0))
	if s.badSum {
		c ^= 0x0101
	}
	binary.BigEndian.PutUint16(b[10:12], c)
	return append(b, s.payload...)
}

func mkUDP(sport, dport uint16, length int, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint16(b, uint16(length))
	b = append(b, 0xbe, 0xef) // checksum not judged by Parse
	return append(b, payload...)
}

func udp(payload []byte) []byte { return mkUDP(1000, 51820, UDPLen+len(payload), payload) }

func mkIPv6(nh uint8, plen int, payload []byte) []byte {
	if plen < 0 {
		plen = len(payload)
	}
	b := []byte{0x60, 0, 0, 0, byte(plen >> 8), byte(plen), nh, 64}
	b = append(b, ip6A[:]...)
	b = append(b, ip6B[:]...)
	return append(b, payload...)
}

// ext returns an extension header (Hop-by-Hop, Routing or Destination
// Options shape) with next header nh and 8*(1+n) bytes.
func ext(nh uint8, n int) []byte {
	b := make([]byte, 8*(1+n))
	b[0], b[1] = nh, byte(n)
	if n == 0 {
		b[2] = 1 // PadN option of 4 bytes: a well formed option area
		b[3] = 4
	}
	return b
}

func fragHdr(nh uint8, offset int, more bool) []byte {
	v := uint16(offset/8) << 3
	if more {
		v |= 1
	}
	return []byte{nh, 0, byte(v >> 8), byte(v), 0xde, 0xad, 0xbe, 0xef}
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestParse(t *testing.T) {
	pl := []byte("wireguard!")
	a4, b4 := netip.AddrFrom4(ip4A), netip.AddrFrom4(ip4B)
	a6, b6 := netip.AddrFrom16(ip6A), netip.AddrFrom16(ip6B)
	udp4 := func(l3off, l4 int, vlan uint16, tagged bool) Packet {
		return Packet{L3Off: l3off, L3End: l3off + l4 + 18, L4Off: l3off + l4, PayloadOff: l3off + l4 + 8, PayloadLen: 10,
			Src: a4, Dst: b4, SrcPort: 1000, DstPort: 51820, EtherType: EtherTypeIPv4, VLANID: vlan, Tagged: tagged,
			IPVersion: 4, Proto: ProtoUDP, TTL: 64}
	}
	udp6 := func(l4 int) Packet {
		return Packet{L3Off: 14, L3End: 14 + 40 + l4 + 18, L4Off: 54 + l4, PayloadOff: 54 + l4 + 8, PayloadLen: 10,
			Src: a6, Dst: b6, SrcPort: 1000, DstPort: 51820, EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP, TTL: 64}
	}
	opts := []byte{0x94, 0x04, 0, 0, 1, 1, 1, 0} // router alert, NOP, NOP, NOP, EOL
	tcp := make([]byte, 24)
	tcp[0], tcp[1], tcp[2], tcp[3], tcp[12] = 0x01, 0xbb, 0x30, 0x39, 0x60 // ports 443, 12345, data offset 6
	tests := []struct {
		name  string
		frame []byte
		want  Reason
		p     *Packet // nil: not compared
	}{
		{"udp4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)})), OK, ptr(udp4(14, 20, 0, false))},
		{"udp4 vlan", cat(ethHdr(42, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)})), OK, ptr(udp4(18, 20, 42, true))},
		// Long enough for the one-pass path of tagged frames.
		{"udp4 vlan long", cat(ethHdr(4094, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp([]byte("wireguard! wireguard! wireguard!"))})), OK,
			ptr(func() Packet { p := udp4(18, 20, 4094, true); p.L3End += 22; p.PayloadLen += 22; return p }())},
		{"udp4 priority tag long", cat(ethHdr(0, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp([]byte("wireguard! wireguard! wireguard!"))})), OK,
			ptr(func() Packet { p := udp4(18, 20, 0, true); p.L3End += 22; p.PayloadLen += 22; return p }())},
		{"udp4 options", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, options: opts, payload: udp(pl)})), OK, ptr(udp4(14, 28, 0, false))},
		// A 60-byte minimum frame: the padding after the IP total
		// length must not reach the payload.
		{"udp4 padded", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)}), make([]byte, 8)), OK, ptr(udp4(14, 20, 0, false))},
		{"udp4 DF is whole", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, flagFrag: 0x4000, payload: udp(pl)})), OK, ptr(udp4(14, 20, 0, false))},
		{"udp4 short udp length", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: mkUDP(1000, 51820, 12, pl)})), OK, nil},
		{"tcp4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoTCP, payload: cat(tcp, pl)})), OK,
			&Packet{L3Off: 14, L3End: 14 + 20 + 34, L4Off: 34, PayloadOff: 58, PayloadLen: 10, Src: a4, Dst: b4, SrcPort: 443, DstPort: 12345,
				EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoTCP, TTL: 64}},
		{"icmp4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoICMPv4, payload: make([]byte, 8)})), OK, nil},
		{"gre4 other proto", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: 47, payload: pl})), OK, nil},
		{"udp6", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, -1, udp(pl))), OK, ptr(udp6(0))},
		{"udp6 hbh dst routing", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoDstOpts, 0), ext(ProtoRouting, 1), ext(ProtoUDP, 0), udp(pl)))), OK, ptr(udp6(8 + 16 + 8))},
		{"udp6 atomic fragment", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoFragment, -1, cat(fragHdr(ProtoUDP, 0, false), udp(pl)))), OK, ptr(udp6(8))},
		{"udp6 padded", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, -1, udp(pl)), make([]byte, 30)), OK, ptr(udp6(0))},
		{"icmp6", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoICMPv6, -1, []byte{128, 0, 0, 0, 0, 1, 0, 1})), OK, nil},
		{"esp6 not walked", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoESP, -1, pl)), OK, nil},
		{"no next header", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoNoNext, -1, nil)), OK, nil},

		{"empty", nil, ReasonRunt, nil},
		{"runt", make([]byte, 13), ReasonRunt, nil},
		{"runt vlan", ethHdr(7, EtherTypeIPv4)[:16], ReasonRunt, nil},
		{"arp", cat(ethHdr(-1, EtherTypeARP), make([]byte, 28)), ReasonNotIP, nil},
		{"qinq", cat(ethHdr(-1, EtherTypeQinQ), make([]byte, 46)), ReasonNotIP, nil},
		{"truncated ipv4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP})[:19]), ReasonTruncatedIP, nil},
		{"truncated ipv6", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, 0, nil)[:39]), ReasonTruncatedIP, nil},
		{"v6 in v4 ethertype", cat(ethHdr(-1, EtherTypeIPv4), mkIPv6(ProtoUDP, -1, udp(pl))), ReasonBadVersion, nil},
		{"v4 in v6 ethertype", cat(ethHdr(-1, EtherTypeIPv6), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(make([]byte, 40))})), ReasonBadVersion, nil},
		{"ihl 4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{ihl: 4, proto: ProtoUDP, payload: udp(pl)})), ReasonBadIHL, nil},
		{"ihl past frame", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{ihl: 15, total: 20, proto: ProtoUDP})), ReasonBadIHL, nil},
		{"total below ihl", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{total: 19, proto: ProtoUDP, payload: udp(pl)})), ReasonBadTotalLength, nil},
		{"total past frame", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{total: 49, proto: ProtoUDP, payload: udp(pl)})), ReasonLengthExceedsFrame, nil},
		{"bad ipv4 checksum", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{badSum: true, proto: ProtoUDP, payload: udp(pl)})), ReasonBadIPv4Checksum, nil},
		{"ipv4 first fragment", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: udp(pl)})), ReasonFragment,
			&Packet{L3Off: 14, L3End: 52, L4Off: 34, PayloadOff: 34, PayloadLen: 18, Src: a4, Dst: b4, EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP, TTL: 64, Fragment: true}},
		{"ipv4 last fragment", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{flagFrag: 185, proto: ProtoUDP, payload: pl})), ReasonFragment, nil},
		{"ipv6 payload past frame", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, 19, udp(pl))), ReasonLengthExceedsFrame, nil},
		{"ipv6 fragment", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoFragment, 0), fragHdr(ProtoUDP, 1448, true), pl))), ReasonFragment,
			&Packet{L3Off: 14, L3End: 14 + 40 + 26, L4Off: 14 + 40 + 16, PayloadOff: 70, PayloadLen: 10, Src: a6, Dst: b6, EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP, TTL: 64, Fragment: true}},
		{"hop-by-hop not first", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoDstOpts, -1, cat(ext(ProtoHopByHop, 0), ext(ProtoUDP, 0), udp(pl)))), ReasonBadExtensionHeader, nil},
		{"extension past payload", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoRouting, -1, ext(ProtoUDP, 3)[:24])), ReasonBadExtensionHeader, nil},
		{"fragment header truncated", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoFragment, -1, fragHdr(ProtoUDP, 0, false)[:7])), ReasonBadExtensionHeader, nil},
		{"too many extensions", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoDstOpts, -1, cat(bytes.Repeat(ext(ProtoDstOpts, 0), 8), ext(ProtoUDP, 0), udp(pl)))), ReasonTooManyExtensionHeaders, nil},
		{"truncated udp", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(nil)[:7]})), ReasonTruncatedL4, nil},
		{"udp length 7", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: mkUDP(1, 2, 7, pl)})), ReasonBadUDPLength, nil},
		// The UDP length reaches into the Ethernet padding: the IP length
		// is what bounds it.
		{"udp length past ip", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: mkUDP(1, 2, 19, pl)}), make([]byte, 10)), ReasonBadUDPLength, nil},
		{"udp6 zero checksum", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, -1, func() []byte { u := udp(pl); u[6], u[7] = 0, 0; return u }())), ReasonUDPZeroChecksum, nil},
		{"truncated tcp", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoTCP, payload: tcp[:19]})), ReasonTruncatedL4, nil},
		{"tcp data offset past packet", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoTCP, payload: tcp[:23]})), ReasonTruncatedL4, nil},
		{"truncated icmp4", cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoICMPv4, payload: make([]byte, 7)})), ReasonTruncatedL4, nil},
		{"truncated icmp6", cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoICMPv6, -1, make([]byte, 3))), ReasonTruncatedL4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Packet
			if got := Parse(tt.frame, &p); got != tt.want {
				t.Fatalf("Parse(%x) = %v, want %v", tt.frame, got, tt.want)
			}
			if tt.p != nil {
				if diff := cmp.Diff(*tt.p, p, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("Parse(%x) packet (-want +got):\n%s", tt.frame, diff)
				}
			}
			if tt.want == OK || tt.want == ReasonFragment {
				checkInvariants(t, tt.frame, &p)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func checkInvariants(t *testing.T, frame []byte, p *Packet) {
	t.Helper()
	if !(p.L3Off <= p.L4Off && p.L4Off <= p.PayloadOff && p.PayloadOff+p.PayloadLen <= p.L3End && p.L3End <= len(frame) && p.PayloadLen >= 0) {
		t.Fatalf("Parse(%x) offsets break the invariant: %+v", frame, p)
	}
}

func TestParseIP(t *testing.T) {
	pl := []byte("inner")
	// A decrypted inner packet padded to 16 bytes by WireGuard: L3End
	// trims it.
	in4 := cat(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)}), make([]byte, 3))
	in6 := cat(mkIPv6(ProtoUDP, -1, udp(pl)), make([]byte, 3))
	tests := []struct {
		name    string
		pkt     []byte
		want    Reason
		wantEnd int
	}{
		{"ipv4", in4, OK, 33},
		{"ipv6", in6, OK, 53},
		{"empty", nil, ReasonTruncatedIP, 0},
		{"version 5", []byte{0x50, 0, 0, 0}, ReasonBadVersion, 0},
	}
	for _, tt := range tests {
		var p Packet
		got := ParseIP(tt.pkt, &p)
		if got != tt.want || (got == OK && p.L3End != tt.wantEnd) {
			t.Errorf("ParseIP(%s) = %v L3End %d, want %v L3End %d", tt.name, got, p.L3End, tt.want, tt.wantEnd)
		}
		if got == OK && (p.L3Off != 0 || p.EtherType != 0) {
			t.Errorf("ParseIP(%s) L3Off, EtherType = %d, %#x, want 0, 0", tt.name, p.L3Off, p.EtherType)
		}
	}
}

func TestReasonString(t *testing.T) {
	for r := Reason(0); r < NumReasons; r++ {
		if r.String() == "" {
			t.Errorf("Reason(%d).String() = \"\", want a name", r)
		}
	}
	if got, want := Reason(200).String(), "reason(200)"; got != want {
		t.Errorf("Reason(200).String() = %q, want %q", got, want)
	}
}

// TestParseTruncations parses every prefix of valid frames: a prefix that
// cuts into the IP packet must be rejected, one that only cuts padding must
// parse as the whole frame did.
func TestParseTruncations(t *testing.T) {
	pl := []byte("0123456789abcdef")
	frames := [][]byte{
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, options: []byte{1, 1, 1, 0}, payload: udp(pl)}), make([]byte, 9)),
		cat(ethHdr(3, EtherTypeIPv6), mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoFragment, 0), fragHdr(ProtoUDP, 0, false), udp(pl))), make([]byte, 5)),
	}
	for _, frame := range frames {
		var whole Packet
		if r := Parse(frame, &whole); r != OK {
			t.Fatalf("Parse(%x) = %v, want ok", frame, r)
		}
		for i := range len(frame) {
			var p Packet
			r := Parse(frame[:i], &p)
			switch {
			case i < whole.L3End && r == OK:
				t.Errorf("Parse(frame[:%d]) = ok, want a rejection (IP packet ends at %d)", i, whole.L3End)
			case i >= whole.L3End && (r != OK || p != whole):
				t.Errorf("Parse(frame[:%d]) = %v %+v, want ok %+v", i, r, p, whole)
			}
		}
	}
}

func TestParseL3(t *testing.T) {
	pl := []byte("inner")
	shortTCP := []byte{0, 1, 0, 2, 0, 0} // six bytes of a TCP header
	tests := []struct {
		name     string
		pkt      []byte
		want     Reason
		wantEnd  int
		wantL4   int
		wantProt uint8
		wantFrag bool
	}{
		{"udp4 with padding", cat(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)}), make([]byte, 3)), OK, 33, 20, ProtoUDP, false},
		{"truncated tcp4: forwarded", mkIPv4(ip4Spec{proto: ProtoTCP, payload: shortTCP}), OK, 26, 20, ProtoTCP, false},
		{"gre4", mkIPv4(ip4Spec{proto: 47, payload: pl}), OK, 25, 20, 47, false},
		{"options", mkIPv4(ip4Spec{proto: ProtoUDP, options: []byte{1, 1, 1, 0}, payload: udp(pl)}), OK, 37, 24, ProtoUDP, false},
		{"fragment", mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: udp(pl)}), OK, 33, 20, ProtoUDP, true},
		{"udp6 zero checksum: forwarded", mkIPv6(ProtoUDP, -1, mkUDP(1, 2, 8, nil)), OK, 48, 40, ProtoUDP, false},
		{"ipv6 extension chain: not walked", mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoUDP, 0), udp(pl))), OK, 61, 40, ProtoHopByHop, false},
		{"bad checksum", mkIPv4(ip4Spec{badSum: true, proto: ProtoUDP, payload: udp(pl)}), ReasonBadIPv4Checksum, 0, 0, 0, false},
		{"total past the packet", mkIPv4(ip4Spec{total: 200, proto: ProtoUDP, payload: udp(pl)}), ReasonLengthExceedsFrame, 0, 0, 0, false},
		{"total under the header", mkIPv4(ip4Spec{total: 19, proto: ProtoUDP, payload: udp(pl)}), ReasonBadTotalLength, 0, 0, 0, false},
		{"ihl 4", mkIPv4(ip4Spec{ihl: 4, proto: ProtoUDP, payload: udp(pl)}), ReasonBadIHL, 0, 0, 0, false},
		{"ipv6 payload past the packet", mkIPv6(ProtoUDP, 100, udp(pl)), ReasonLengthExceedsFrame, 0, 0, 0, false},
		{"ipv6 cut", mkIPv6(ProtoUDP, -1, nil)[:39], ReasonTruncatedIP, 0, 0, 0, false},
		{"empty", nil, ReasonTruncatedIP, 0, 0, 0, false},
		{"version 5", []byte{0x50, 0, 0, 0}, ReasonBadVersion, 0, 0, 0, false},
	}
	for _, tt := range tests {
		var p Packet
		p.SrcPort, p.EtherType, p.Tagged = 7, 7, true // must be cleared
		got := ParseL3(tt.pkt, &p)
		if got != tt.want {
			t.Errorf("ParseL3(%s) = %v, want %v", tt.name, got, tt.want)
			continue
		}
		if got != OK {
			continue
		}
		if p.L3End != tt.wantEnd || p.L4Off != tt.wantL4 || p.Proto != tt.wantProt || p.Fragment != tt.wantFrag ||
			p.PayloadOff != p.L4Off || p.PayloadLen != p.L3End-p.L4Off || p.L3Off != 0 ||
			p.SrcPort != 0 || p.DstPort != 0 || p.EtherType != 0 || p.Tagged {
			t.Errorf("ParseL3(%s) = %+v, want L3End %d L4Off %d Proto %d Fragment %v and no L2/L4 fields",
				tt.name, p, tt.wantEnd, tt.wantL4, tt.wantProt, tt.wantFrag)
		}
		checkInvariants(t, tt.pkt, &p)
	}
	pkt := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)})
	var p Packet
	if a := testing.AllocsPerRun(100, func() { ParseL3(pkt, &p) }); a != 0 {
		t.Errorf("ParseL3: %v allocs, want 0", a)
	}
}
