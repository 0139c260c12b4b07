package arp

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// unhex decodes a hex dump with spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// arpRequestWire is an ARP request "who-has 198.18.0.1 tell 198.18.0.2"
// laid out by hand from RFC 826: broadcast Ethernet header, hrd 1, pro
// 0x0800, hln 6, pln 4, op 1, sha, spa, tha (zero), tpa; padded to 60
// bytes as Linux sends it.
const arpRequestWire = `
ffffffffffff 020000000002 0806
0001 0800 06 04 0001
020000000002 c6120002
000000000000 c6120001
000000000000000000000000000000000000`

var (
	macA = MAC{0x02, 0, 0, 0, 0, 0x01}
	macB = MAC{0x02, 0, 0, 0, 0, 0x02}
	ip4A = netip.MustParseAddr("198.18.0.1")
	ip4B = netip.MustParseAddr("198.18.0.2")
)

func TestParseARPKnownAnswer(t *testing.T) {
	got, rs := ParseARP(unhex(t, arpRequestWire))
	if rs != ReasonNone {
		t.Fatalf("ParseARP(request) reason = %v, want none", rs)
	}
	want := ARP{EthDst: Broadcast, EthSrc: macB, Op: ARPRequest, SenderMAC: macB, SenderIP: ip4B, TargetIP: ip4A}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("ParseARP(request) (-want +got):\n%s", diff)
	}
	// Building the same packet gives the same bytes.
	var b [MinFrameLen]byte
	n, err := want.Marshal(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if w := unhex(t, arpRequestWire); string(b[:n]) != string(w) {
		t.Errorf("Marshal = %x, want %x", b[:n], w)
	}
}

func TestParseARPReject(t *testing.T) {
	good := func() []byte { return unhex(t, arpRequestWire) }
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   Reason
	}{
		{"short ethernet", func(b []byte) []byte { return b[:13] }, ReasonTruncated},
		{"not arp", func(b []byte) []byte { b[12], b[13] = 0x08, 0x00; return b }, ReasonNotNeighbour},
		{"short arp", func(b []byte) []byte { return b[:41] }, ReasonTruncated},
		{"unpadded ok", func(b []byte) []byte { return b[:42] }, ReasonNone},
		{"hardware type 6", func(b []byte) []byte { b[15] = 6; return b }, ReasonHardware},
		{"protocol ipv6", func(b []byte) []byte { b[16], b[17] = 0x86, 0xdd; return b }, ReasonHardware},
		{"hlen 8", func(b []byte) []byte { b[18] = 8; return b }, ReasonHardware},
		{"plen 16", func(b []byte) []byte { b[19] = 16; return b }, ReasonHardware},
		{"op 3 (rarp)", func(b []byte) []byte { b[21] = 3; return b }, ReasonOp},
		{"op 0", func(b []byte) []byte { b[21] = 0; return b }, ReasonOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := ParseARP(tt.mutate(good())); got != tt.want {
				t.Errorf("ParseARP(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

// slowChecksum is RFC 1071 the obvious way: 16-bit big-endian words,
// 32-bit accumulator, folded at the end; returns the field value.
func slowChecksum(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint32
	for i := 0; i < len(all); i += 2 {
		s += uint32(all[i])<<8 | uint32(all[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// rawNDP builds an NDP frame byte by byte from RFC 4861 §4.3/§4.4 and RFC
// 8200 §3, with the checksum from slowChecksum over the RFC 8200 §8.1
// pseudo-header, independent of Marshal.
func rawNDP(ethDst, ethSrc MAC, src, dst netip.Addr, hop, typ, code, flags byte, target netip.Addr, opts []byte) []byte {
	s, d, tg := src.As16(), dst.As16(), target.As16()
	icmp := []byte{typ, code, 0, 0, flags, 0, 0, 0}
	icmp = append(icmp, tg[:]...)
	icmp = append(icmp, opts...)
	pl := len(icmp)
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(pl>>8), byte(pl), 0, 0, 0, 58)
	ck := slowChecksum(pseudo, icmp)
	icmp[2], icmp[3] = byte(ck>>8), byte(ck)
	f := append(append([]byte{}, ethDst[:]...), ethSrc[:]...)
	f = append(f, 0x86, 0xdd, 0x60, 0, 0, 0, byte(pl>>8), byte(pl), 58, hop)
	f = append(f, s[:]...)
	f = append(f, d[:]...)
	return append(f, icmp...)
}

var (
	ip6A   = netip.MustParseAddr("2001:db8::1")
	ip6B   = netip.MustParseAddr("2001:db8::2")
	ll6B   = netip.MustParseAddr("fe80::2")
	snmA   = netip.MustParseAddr("ff02::1:ff00:1")
	macSNA = MAC{0x33, 0x33, 0xff, 0, 0, 1}
)

func lla(typ byte, m MAC) []byte { return append([]byte{typ, 1}, m[:]...) }

func TestParseNDP(t *testing.T) {
	addrCmp := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	tests := []struct {
		name  string
		frame []byte
		want  Reason
		msg   NDP // checked when want is ReasonNone
	}{
		{"ns multicast with slla", rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, lla(1, macB)), ReasonNone,
			NDP{EthDst: macSNA, EthSrc: macB, Src: ip6B, Dst: snmA, Type: ICMPv6NS, Target: ip6A, HasLinkAddr: true, LinkAddr: macB}},
		{"ns dad", rawNDP(macSNA, macB, netip.IPv6Unspecified(), snmA, 255, 135, 0, 0, ip6A, nil), ReasonNone,
			NDP{EthDst: macSNA, EthSrc: macB, Src: netip.IPv6Unspecified(), Dst: snmA, Type: ICMPv6NS, Target: ip6A}},
		{"na solicited", rawNDP(macA, macB, ip6B, ip6A, 255, 136, 0, 0x60, ip6B, lla(2, macB)), ReasonNone,
			NDP{EthDst: macA, EthSrc: macB, Src: ip6B, Dst: ip6A, Type: ICMPv6NA, Target: ip6B, Solicited: true, Override: true, HasLinkAddr: true, LinkAddr: macB}},
		{"na router flag, unknown option skipped", rawNDP(macA, macB, ip6B, ip6A, 255, 136, 0, 0x80, ip6B, append([]byte{14, 1, 0, 0, 0, 0, 0, 0}, lla(2, macB)...)), ReasonNone,
			NDP{EthDst: macA, EthSrc: macB, Src: ip6B, Dst: ip6A, Type: ICMPv6NA, Target: ip6B, Router: true, HasLinkAddr: true, LinkAddr: macB}},
		{"ns with ethernet padding", append(rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, nil), 0, 0, 0, 0), ReasonNone,
			NDP{EthDst: macSNA, EthSrc: macB, Src: ip6B, Dst: snmA, Type: ICMPv6NS, Target: ip6A}},
		{"hop limit 254", rawNDP(macSNA, macB, ip6B, snmA, 254, 135, 0, 0, ip6A, nil), ReasonHopLimit, NDP{}},
		{"hop limit 64 na", rawNDP(macA, macB, ip6B, ip6A, 64, 136, 0, 0x60, ip6B, nil), ReasonHopLimit, NDP{}},
		{"code 1", rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 1, 0, ip6A, nil), ReasonCode, NDP{}},
		{"target multicast", rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, snmA, nil), ReasonTargetMulticast, NDP{}},
		{"ns from a multicast source", rawNDP(macSNA, macB, netip.MustParseAddr("ffff::"), snmA, 255, 135, 0, 0, ip6A, nil), ReasonSourceMulticast, NDP{}},
		{"na from a multicast source", rawNDP(macA, macB, snmA, ip6A, 255, 136, 0, 0x60, ip6B, nil), ReasonSourceMulticast, NDP{}},
		{"zero-length option", rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, []byte{1, 0, 0, 0, 0, 0, 0, 0}), ReasonOption, NDP{}},
		{"option past end", rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, []byte{1, 2, 0, 0, 0, 0, 0, 0}), ReasonOption, NDP{}},
		{"dad with slla", rawNDP(macSNA, macB, netip.IPv6Unspecified(), snmA, 255, 135, 0, 0, ip6A, lla(1, macB)), ReasonUnspecifiedSrc, NDP{}},
		{"dad to unicast", rawNDP(macA, macB, netip.IPv6Unspecified(), ip6A, 255, 135, 0, 0, ip6A, nil), ReasonUnspecifiedSrc, NDP{}},
		{"na multicast solicited", rawNDP(MAC{0x33, 0x33, 0, 0, 0, 1}, macB, ip6B, allNodes, 255, 136, 0, 0x40, ip6B, nil), ReasonSolicitedFlag, NDP{}},
		{"echo request", rawNDP(macA, macB, ip6B, ip6A, 64, 128, 0, 0, ip6A, nil), ReasonNotNeighbour, NDP{}},
		{"ipv4 ethertype", unhex(t, arpRequestWire), ReasonNotNeighbour, NDP{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rs := ParseNDP(tt.frame)
			if rs != tt.want {
				t.Fatalf("ParseNDP(%s) = %v, want %v", tt.name, rs, tt.want)
			}
			if rs != ReasonNone {
				return
			}
			if diff := cmp.Diff(tt.msg, got, addrCmp); diff != "" {
				t.Errorf("ParseNDP(%s) (-want +got):\n%s", tt.name, diff)
			}
			// Marshal gives the same bytes when the frame has at
			// most one link-layer option and no padding.
			var b [NDPFrameLen]byte
			n, err := got.Marshal(b[:])
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.frame) == n && string(b[:n]) != string(tt.frame) {
				t.Errorf("Marshal(ParseNDP(%s)) = %x, want %x", tt.name, b[:n], tt.frame)
			}
		})
	}
}

func TestParseNDPCorrupt(t *testing.T) {
	good := func() []byte { return rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, lla(1, macB)) }
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   Reason
	}{
		{"checksum", func(b []byte) []byte { b[ndpICMPOffset+2] ^= 1; return b }, ReasonChecksum},
		{"flipped target bit", func(b []byte) []byte { b[ndpTargetOffset+15] ^= 0x10; return b }, ReasonChecksum},
		{"version 4", func(b []byte) []byte { b[14] = 0x40; return b }, ReasonIPVersion},
		{"hop-by-hop header", func(b []byte) []byte { b[20] = 0; return b }, ReasonNotNeighbour},
		{"payload length past frame", func(b []byte) []byte { b[19]++; return b }, ReasonTruncated},
		{"icmp shorter than 24", func(b []byte) []byte { b[19] = 20; return b[:ndpICMPOffset+20] }, ReasonTruncated},
		{"no ip header", func(b []byte) []byte { return b[:30] }, ReasonTruncated},
		{"empty icmp", func(b []byte) []byte { b[18], b[19] = 0, 0; return b }, ReasonNotNeighbour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := ParseNDP(tt.mutate(good())); got != tt.want {
				t.Errorf("ParseNDP(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestSolicitedNode(t *testing.T) {
	// RFC 4291 §2.7.1: ff02::1:ffXX:XXXX from the low 24 bits; RFC 2464 §7: 33:33 + low 32 bits.
	a := netip.MustParseAddr("fe80::2aa:ff:fe28:9c5a")
	if got, want := SolicitedNode(a), netip.MustParseAddr("ff02::1:ff28:9c5a"); got != want {
		t.Errorf("SolicitedNode(%v) = %v, want %v", a, got, want)
	}
	if got, want := MulticastMAC(SolicitedNode(a)), (MAC{0x33, 0x33, 0xff, 0x28, 0x9c, 0x5a}); got != want {
		t.Errorf("MulticastMAC = %v, want %v", got, want)
	}
}

func FuzzParseARP(f *testing.F) {
	b, _ := hex.DecodeString(strings.Join(strings.Fields(arpRequestWire), ""))
	f.Add(b)        // a padded request
	f.Add(b[:42])   // unpadded
	f.Add(b[:30])   // truncated ARP
	f.Add([]byte{}) // empty
	r := append([]byte{}, b...)
	r[21] = 2 // a reply
	f.Add(r)
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, rs := ParseARP(frame)
		if rs != ReasonNone {
			return
		}
		var out [MinFrameLen]byte
		n, err := p.Marshal(out[:])
		if err != nil {
			t.Fatalf("Marshal(ParseARP(%x)): %v", frame, err)
		}
		if string(out[:ARPFrameLen]) != string(frame[:ARPFrameLen]) {
			t.Fatalf("Marshal(ParseARP(%x)) = %x, want the first 42 bytes back", frame, out[:n])
		}
		q, rs := ParseARP(out[:n])
		if rs != ReasonNone || q != p {
			t.Fatalf("ParseARP(Marshal(%+v)) = %+v, %v", p, q, rs)
		}
	})
}

func FuzzParseNDP(f *testing.F) {
	f.Add(rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, lla(1, macB)))                                             // NS with SLLA
	f.Add(rawNDP(macSNA, macB, netip.IPv6Unspecified(), snmA, 255, 135, 0, 0, ip6A, nil))                                   // DAD probe
	f.Add(rawNDP(macA, macB, ip6B, ip6A, 255, 136, 0, 0x60, ip6B, lla(2, macB)))                                            // solicited NA
	f.Add(rawNDP(macA, macB, ll6B, ip6A, 255, 136, 0, 0xe0, ll6B, []byte{14, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})) // NA, router, unknown 16-byte option
	f.Add(rawNDP(macSNA, macB, ip6B, snmA, 255, 135, 0, 0, ip6A, []byte{1, 0}))                                             // zero-length option
	f.Add(rawNDP(macSNA, macB, ip6B, snmA, 254, 135, 0, 0, ip6A, nil))                                                      // hop limit 254
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, rs := ParseNDP(frame)
		if rs != ReasonNone {
			return
		}
		var out [NDPFrameLen]byte
		n, err := m.Marshal(out[:])
		if err != nil {
			t.Fatalf("Marshal(ParseNDP(%x)): %v", frame, err)
		}
		q, rs := ParseNDP(out[:n])
		if rs != ReasonNone || q != m {
			t.Fatalf("ParseNDP(Marshal(%+v)) = %+v, %v", m, q, rs)
		}
	})
}

func TestReasonNames(t *testing.T) {
	seen := map[string]Reason{}
	for r := Reason(0); r < numReasons; r++ {
		name := r.String()
		if name == "" {
			t.Errorf("Reason(%d).String() = \"\"", r)
		}
		if o, dup := seen[name]; dup {
			t.Errorf("Reason(%d) and Reason(%d) are both %q", r, o, name)
		}
		seen[name] = r
	}
}
