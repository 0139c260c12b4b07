package header

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// addFrameSeeds adds one frame of every shape Parse knows, each commented.
func addFrameSeeds(f *testing.F) {
	pl := []byte("seed")
	opts := []byte{0x94, 0x04, 0, 0}
	tcp := make([]byte, 20)
	tcp[12] = 0x50
	seeds := [][]byte{
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)})),                                                    // UDP/IPv4
		cat(ethHdr(5, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)})),                                                     // 802.1Q VLAN 5, UDP/IPv4
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, options: opts, payload: udp(pl)}), make([]byte, 6)),                    // IPv4 options and Ethernet padding
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: udp(pl)})),                                  // IPv4 first fragment
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoTCP, payload: tcp})),                                                        // TCP/IPv4
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoICMPv4, payload: []byte{8, 0, 0, 0, 0, 0, 0, 0}})),                          // ICMPv4 echo
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{badSum: true, proto: ProtoUDP, payload: udp(pl)})),                                      // bad IPv4 checksum
		cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{total: 200, proto: ProtoUDP, payload: udp(pl)})),                                        // total length past frame
		cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, -1, udp(pl))),                                                                         // UDP/IPv6
		cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoRouting, 0), ext(ProtoDstOpts, 1), ext(ProtoUDP, 0), udp(pl)))), // extension chain
		cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoFragment, -1, cat(fragHdr(ProtoUDP, 8, true), pl))),                                        // IPv6 fragment
		cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoICMPv6, -1, []byte{135, 0, 0, 0, 0, 0, 0, 0})),                                             // ICMPv6 (NS shape)
		cat(ethHdr(-1, EtherTypeARP), make([]byte, 28)),                                                                                       // ARP: not IP
		ethHdr(-1, EtherTypeIPv4), // Ethernet header alone
	}
	for _, s := range seeds {
		f.Add(s)
	}
}

// roundTrip rebuilds the headers Parse accepted with the Put functions and
// compares them with the frame, and cross-checks the views against
// golang.org/x/net's parsers.
func roundTrip(t *testing.T, frame []byte, p *Packet) {
	t.Helper()
	if p.L3Off > 0 {
		e := Ethernet(frame)
		b := make([]byte, EthernetVLANLen)
		var n int
		if p.Tagged {
			n = PutEthernetVLAN(b, e.Dst(), e.Src(), p.VLANID, p.EtherType)
			b[14] |= frame[14] &^ 0x0f // PCP and DEI are not written
		} else {
			n = PutEthernet(b, e.Dst(), e.Src(), p.EtherType)
		}
		if n != p.L3Off || !bytes.Equal(b[:n], frame[:n]) {
			t.Fatalf("Ethernet round trip = %x, want %x", b[:n], frame[:n])
		}
	}
	pkt := frame[p.L3Off:p.L3End]
	switch p.IPVersion {
	case 4:
		h := IPv4(pkt)
		ref, err := ipv4.ParseHeader(pkt)
		if err != nil {
			t.Fatalf("ipv4.ParseHeader(%x) = %v, Parse accepted it", pkt, err)
		}
		if h.HeaderLen() != ref.Len || h.TotalLength() != ref.TotalLen || int(h.Protocol()) != ref.Protocol || int(h.TTL()) != ref.TTL ||
			!ref.Src.Equal(p.Src.AsSlice()) || !ref.Dst.Equal(p.Dst.AsSlice()) || h.FragmentOffset() != ref.FragOff*8 || // x/net keeps 8-byte units
			int(h.ID()) != ref.ID {
			t.Fatalf("IPv4 view of %x disagrees with ipv4.ParseHeader %+v", pkt, ref)
		}
		if !h.VerifyChecksum() {
			t.Fatalf("IPv4(%x).VerifyChecksum() = false, Parse accepted it", pkt)
		}
		if h.HeaderLen() == IPv4MinLen && h.TTL() != 0 && !p.Fragment && pkt[6]&0x80 == 0 {
			f := IPv4Fields{TOS: h.TOS(), TTL: h.TTL(), Protocol: h.Protocol(), ID: h.ID(), DontFragment: h.DontFragment(), Src: h.SrcBytes(), Dst: h.DstBytes()}
			b := make([]byte, IPv4MinLen)
			PutIPv4(b, &f, h.TotalLength()-IPv4MinLen)
			// The checksum may legitimately be 0x0000 or 0xffff
			// when both verify; compare the rest.
			if !bytes.Equal(b[:10], pkt[:10]) || !bytes.Equal(b[12:], pkt[12:20]) || !IPv4(b).VerifyChecksum() {
				t.Fatalf("IPv4 round trip = %x, want %x", b, pkt[:20])
			}
		}
	case 6:
		h := IPv6(pkt)
		ref, err := ipv6.ParseHeader(pkt)
		if err != nil {
			t.Fatalf("ipv6.ParseHeader(%x) = %v, Parse accepted it", pkt, err)
		}
		if h.PayloadLength() != ref.PayloadLen || int(h.HopLimit()) != ref.HopLimit || int(h.FlowLabel()) != ref.FlowLabel || int(h.TrafficClass()) != ref.TrafficClass ||
			!ref.Src.Equal(p.Src.AsSlice()) || !ref.Dst.Equal(p.Dst.AsSlice()) {
			t.Fatalf("IPv6 view of %x disagrees with ipv6.ParseHeader %+v", pkt, ref)
		}
		if h.HopLimit() != 0 {
			f := IPv6Fields{TrafficClass: h.TrafficClass(), FlowLabel: h.FlowLabel(), NextHeader: h.NextHeader(), HopLimit: h.HopLimit(), Src: h.SrcBytes(), Dst: h.DstBytes()}
			b := make([]byte, IPv6Len)
			PutIPv6(b, &f, h.PayloadLength())
			if !bytes.Equal(b, pkt[:IPv6Len]) {
				t.Fatalf("IPv6 round trip = %x, want %x", b, pkt[:IPv6Len])
			}
		}
	}
	if p.Proto == ProtoUDP && !p.Fragment {
		u := UDP(frame[p.L4Off:p.L3End])
		if u.SrcPort() != p.SrcPort || u.DstPort() != p.DstPort || u.Length() != UDPLen+p.PayloadLen {
			t.Fatalf("UDP view of %x disagrees with Packet %+v", u[:UDPLen], p)
		}
		b := make([]byte, UDPLen)
		PutUDP(b, p.SrcPort, p.DstPort, p.PayloadLen)
		if !bytes.Equal(b[:6], u[:6]) {
			t.Fatalf("UDP round trip = %x, want %x", b[:6], u[:6])
		}
	}
}

func FuzzParse(f *testing.F) {
	addFrameSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p Packet
		r := Parse(frame, &p)
		if r >= NumReasons {
			t.Fatalf("Parse(%x) = %d, not a Reason", frame, r)
		}
		if len(frame) >= EthernetLen && binary.BigEndian.Uint16(frame[12:14]) == EtherTypeIPv4 {
			// The one-pass IPv4 path must agree with the general one.
			ref := Packet{L3Off: EthernetLen, EtherType: EtherTypeIPv4}
			if rr := parseIPv4(frame, EthernetLen, &ref); rr != r || (r == OK || r == ReasonFragment) && ref != p {
				t.Fatalf("Parse(%x) = %v %+v, the general IPv4 path %v %+v", frame, r, p, rr, ref)
			}
		}
		if r.IPHeaderOK() {
			// The L3 fields are filled, as ParseL3 fills them.
			var q Packet
			if rq := ParseL3(frame[p.L3Off:], &q); rq != OK || q.Src != p.Src || q.Dst != p.Dst ||
				q.L3End != p.L3End-p.L3Off || q.IPVersion != p.IPVersion || q.TTL != p.TTL {
				t.Fatalf("Parse(%x) = %v %+v, ParseL3 of its IP packet %v %+v", frame, r, p, rq, q)
			}
		}
		if r != OK && r != ReasonFragment {
			return
		}
		checkInvariants(t, frame, &p)
		roundTrip(t, frame, &p)
		// The same IP packet without its Ethernet header parses the same.
		var q Packet
		if r2 := ParseIP(frame[p.L3Off:], &q); r2 != r || q.L3End != p.L3End-p.L3Off || q.PayloadLen != p.PayloadLen || q.Src != p.Src {
			t.Fatalf("ParseIP(frame[%d:]) = %v %+v, Parse gave %v %+v", p.L3Off, r2, q, r, p)
		}
	})
}

func FuzzParseIP(f *testing.F) {
	f.Add(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp([]byte("inner"))}))                                                                    // inner UDP/IPv4
	f.Add(cat(mkIPv6(ProtoUDP, -1, udp([]byte("inner"))), make([]byte, 11)))                                                                  // inner UDP/IPv6 with WireGuard padding
	f.Add(mkIPv6(ProtoDstOpts, -1, cat(ext(ProtoFragment, 0), fragHdr(ProtoTCP, 0, false))))                                                  // extension chain ending in an atomic fragment
	f.Add([]byte{0x45})                                                                                                                       // one byte
	f.Add(mkIPv4(ip4Spec{proto: ProtoTCP, payload: cat([]byte{0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0x60}, make([]byte, 11), []byte("data"))})) // inner TCP/IPv4 with 4 bytes of options
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var p Packet
		r := ParseIP(pkt, &p)
		if len(pkt) > 0 && pkt[0]>>4 == IPv4Version {
			var ref Packet
			if rr := parseIPv4(pkt, 0, &ref); rr != r || (r == OK || r == ReasonFragment) && ref != p {
				t.Fatalf("ParseIP(%x) = %v %+v, the general IPv4 path %v %+v", pkt, r, p, rr, ref)
			}
		}
		if r != OK && r != ReasonFragment {
			return
		}
		checkInvariants(t, pkt, &p)
		roundTrip(t, pkt, &p)
	})
}

// FuzzParseL3 checks the one-pass IPv4 path against the general one, and
// ParseL3 against ParseIP: whatever ParseIP accepts, ParseL3 accepts with
// the same IP fields (it only judges fewer things).
func FuzzParseL3(f *testing.F) {
	f.Add(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp([]byte("inner"))}))               // inner UDP/IPv4
	f.Add(mkIPv4(ip4Spec{proto: ProtoTCP, payload: []byte{0, 1, 0, 2}}))                 // truncated TCP: ParseIP refuses
	f.Add(mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: udp([]byte("f"))})) // fragment
	f.Add(cat(mkIPv6(ProtoUDP, -1, udp([]byte("inner"))), make([]byte, 11)))             // inner UDP/IPv6 with WireGuard padding
	f.Add(mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoUDP, 0), udp([]byte("x")))))            // extension chain
	f.Add([]byte{0x45})                                                                  // one byte
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var p Packet
		r := ParseL3(pkt, &p)
		if r == ReasonFragment {
			t.Fatalf("ParseL3(%x) = ReasonFragment, want OK with Fragment set", pkt)
		}
		if len(pkt) > 0 && pkt[0]>>4 == IPv4Version {
			var ref Packet
			if rr := parseIPv4Header(pkt, 0, &ref); rr != r || r == OK && ref != p {
				t.Fatalf("ParseL3(%x) = %v %+v, the general IPv4 path %v %+v", pkt, r, p, rr, ref)
			}
		}
		var q Packet
		if rq := ParseIP(pkt, &q); rq == OK || rq == ReasonFragment {
			if r != OK || p.L3End != q.L3End || p.Src != q.Src || p.Dst != q.Dst || p.IPVersion != q.IPVersion || p.TTL != q.TTL ||
				p.IPVersion == IPv4Version && (p.Proto != q.Proto || p.Fragment != q.Fragment || p.L4Off != q.L4Off) {
				t.Fatalf("ParseL3(%x) = %v %+v, ParseIP accepted it as %+v", pkt, r, p, q)
			}
		}
		if r != OK {
			return
		}
		checkInvariants(t, pkt, &p)
	})
}

func FuzzICMPErrors(f *testing.F) {
	f.Add(mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp(make([]byte, 1000))}), uint16(1420), 1500) // too-big UDP/IPv4
	f.Add(mkIPv4(ip4Spec{proto: ProtoICMPv4, payload: []byte{3, 4, 0, 0, 0, 0, 5, 0xdc}}), uint16(576), 100)        // an ICMP error itself
	f.Add(mkIPv6(ProtoUDP, -1, udp(make([]byte, 1400))), uint16(1280), 1500)                                        // too-big UDP/IPv6
	f.Add(mkIPv6(ProtoHopByHop, -1, cat(ext(ProtoICMPv6, 0), []byte{1, 0, 0, 0})), uint16(1280), 60)                // ICMPv6 error behind Hop-by-Hop
	f.Fuzz(func(t *testing.T, off []byte, mtu uint16, bufLen int) {
		if bufLen < 0 || bufLen > 2000 {
			bufLen = 1500
		}
		b := make([]byte, bufLen)
		if n, r := PutICMPv4FragNeeded(b, gw4, off, mtu); r == OK {
			reply := b[:n]
			if n > ICMPv4ErrorMaxLen || n > len(b) || !bytes.Equal(reply[28:], off[:n-28]) {
				t.Fatalf("PutICMPv4FragNeeded(%x) = %d bytes %x", off, n, reply)
			}
			var p Packet
			if r := ParseIP(reply, &p); r != OK || !ICMPv4(reply[20:]).VerifyChecksum() || ICMPv4(reply[20:]).NextHopMTU() != mtu {
				t.Fatalf("ParseIP(PutICMPv4FragNeeded(%x)) = %v", off, r)
			}
		} else if n != 0 {
			t.Fatalf("PutICMPv4FragNeeded(%x) = %d, %v, want 0", off, n, r)
		}
		if n, r := PutICMPv6PacketTooBig(b, gw6, off, uint32(mtu)); r == OK {
			reply := b[:n]
			if n > ICMPv6ErrorMaxLen || !bytes.Equal(reply[48:], off[:n-48]) {
				t.Fatalf("PutICMPv6PacketTooBig(%x) = %d bytes %x", off, n, reply)
			}
			var p Packet
			if r := ParseIP(reply, &p); r != OK {
				t.Fatalf("ParseIP(PutICMPv6PacketTooBig(%x)) = %v", off, r)
			}
			ps := PseudoHeaderChecksum(ProtoICMPv6, p.Src, p.Dst, n-IPv6Len)
			if !ICMPv6(reply[IPv6Len:]).VerifyChecksum(ps) || binary.BigEndian.Uint32(reply[44:48]) != uint32(mtu) {
				t.Fatalf("PutICMPv6PacketTooBig(%x) checksum or MTU wrong: %x", off, reply[40:48])
			}
		} else if n != 0 {
			t.Fatalf("PutICMPv6PacketTooBig(%x) = %d, %v, want 0", off, n, r)
		}
		// The checks without writing agree with the writers, but for a
		// buffer too small, which they do not see.
		agree := func(name string, allowed, put Reason) {
			if allowed != put && (allowed != OK || put != ReasonBufferTooSmall) {
				t.Fatalf("%s(%x) = %v, the writer says %v", name, off, allowed, put)
			}
		}
		_, r4 := PutICMPv4TimeExceeded(b, gw4, off)
		agree("ICMPv4ErrorAllowed", ICMPv4ErrorAllowed(off), r4)
		_, r6 := PutICMPv6TimeExceeded(b, gw6, off)
		agree("ICMPv6ErrorAllowed(time exceeded)", ICMPv6ErrorAllowed(off, ICMPv6TypeTimeExceeded), r6)
		_, r6 = PutICMPv6PacketTooBig(b, gw6, off, uint32(mtu))
		agree("ICMPv6ErrorAllowed(packet too big)", ICMPv6ErrorAllowed(off, ICMPv6TypePacketTooBig), r6)
	})
}

// FuzzUpperLayer feeds the IPv6 extension-header walker arbitrary chains.
func FuzzUpperLayer(f *testing.F) {
	f.Add(cat(ext(ProtoRouting, 0), ext(ProtoUDP, 1)), uint8(ProtoHopByHop))              // Hop-by-Hop, Routing, then UDP
	f.Add(fragHdr(ProtoTCP, 0, false), uint8(ProtoFragment))                              // atomic fragment
	f.Add(fragHdr(ProtoUDP, 1280, true), uint8(ProtoFragment))                            // a real fragment
	f.Add(bytes.Repeat(ext(ProtoDstOpts, 0), MaxExtensionHeaders+1), uint8(ProtoDstOpts)) // too many
	f.Add([]byte{ProtoUDP}, uint8(ProtoDstOpts))                                          // truncated
	f.Fuzz(func(t *testing.T, p []byte, nh uint8) {
		proto, off, frag, r := UpperLayer(p, nh)
		if off < 0 || off > len(p) {
			t.Fatalf("UpperLayer(%x, %d) offset %d outside [0, %d]", p, nh, off, len(p))
		}
		if r == OK && !frag {
			switch proto {
			case ProtoHopByHop, ProtoRouting, ProtoDstOpts, ProtoFragment:
				t.Fatalf("UpperLayer(%x, %d) = %d, an extension header, with OK", p, nh, proto)
			}
		}
		if r >= NumReasons {
			t.Fatalf("UpperLayer(%x, %d) reason %d", p, nh, r)
		}
	})
}
