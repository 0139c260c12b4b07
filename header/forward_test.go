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

func TestForward(t *testing.T) {
	for ttl := 0; ttl < 256; ttl++ {
		for _, tos := range []byte{0, 0xff} { // vary the checksum
			p := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp([]byte("x"))})
			p[1], p[8] = tos, byte(ttl)
			IPv4(p).SetChecksum()
			q := bytes.Clone(p)
			ok := Forward(q)
			if ok != (ttl > 1) {
				t.Fatalf("Forward(ttl %d) = %v", ttl, ok)
			}
			want := bytes.Clone(p)
			if ok {
				want[8]--
				IPv4(want).SetChecksum() // the slow way
			}
			if !bytes.Equal(q, want) {
				t.Fatalf("Forward(ttl %d, tos %#x) header %x, want %x", ttl, tos, q[:20], want[:20])
			}
		}
		p := mkIPv6(ProtoUDP, -1, udp(nil))
		p[7] = byte(ttl)
		if ok := Forward(p); ok != (ttl > 1) || (ok && p[7] != byte(ttl-1)) || (!ok && p[7] != byte(ttl)) {
			t.Fatalf("Forward(hop limit %d) = %v, hop limit now %d", ttl, ok, p[7])
		}
	}
	// Every checksum value: the incremental update matches a fresh
	// computation, ±0 included.
	p := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(nil)})
	for id := 0; id < 1<<16; id++ {
		binary.BigEndian.PutUint16(p[4:6], uint16(id))
		p[8] = 9
		IPv4(p).SetChecksum()
		Forward(p)
		got := IPv4(p).Checksum()
		IPv4(p).SetChecksum()
		if got != IPv4(p).Checksum() {
			t.Fatalf("id %#x: Forward checksum %#04x, fresh %#04x", id, got, IPv4(p).Checksum())
		}
	}
}

// TestRestoreHop: RestoreHop gives back, byte for byte, the header
// Forward took the hop from (every TTL a router forwards, every IPv4
// checksum value).
func TestRestoreHop(t *testing.T) {
	for ttl := 2; ttl < 256; ttl++ {
		p := mkIPv6(ProtoUDP, -1, udp(nil))
		p[7] = byte(ttl)
		q := bytes.Clone(p)
		Forward(q)
		if RestoreHop(q); !bytes.Equal(q, p) {
			t.Fatalf("hop limit %d: restored %x, want %x", ttl, q[:8], p[:8])
		}
	}
	p := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(nil)})
	for id := 0; id < 1<<16; id++ {
		binary.BigEndian.PutUint16(p[4:6], uint16(id))
		p[8] = byte(2 + id%254)
		IPv4(p).SetChecksum()
		q := bytes.Clone(p)
		Forward(q)
		if RestoreHop(q); !bytes.Equal(q, p) {
			t.Fatalf("id %#x TTL %d: restored %x, want %x", id, p[8], q[:20], p[:20])
		}
	}
}

func TestPutICMPTimeExceeded(t *testing.T) {
	p4 := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(make([]byte, 1000))})
	p4[8] = 1
	IPv4(p4).SetChecksum()
	b := make([]byte, 1500)
	n, r := PutICMPv4TimeExceeded(b, gw4, p4)
	if r != OK || n != 576 {
		t.Fatalf("PutICMPv4TimeExceeded = %d, %v, want 576, ok", n, r)
	}
	if h := IPv4(b[:n]); !h.VerifyChecksum() || h.Src() != netip.AddrFrom4(gw4) || h.DstBytes() != IPv4(p4).SrcBytes() {
		t.Errorf("reply header %x", b[:20])
	}
	msg, err := icmp.ParseMessage(1, b[20:n])
	if err != nil {
		t.Fatal(err)
	}
	if te, ok := msg.Body.(*icmp.TimeExceeded); msg.Type != ipv4.ICMPTypeTimeExceeded || msg.Code != 0 || !ok ||
		!bytes.Equal(te.Data, p4[:548]) || !ICMPv4(b[20:n]).VerifyChecksum() {
		t.Errorf("reply = %+v, want time exceeded quoting the packet", msg)
	}
	if n, r := PutICMPv4TimeExceeded(b, gw4, IPv4(mkIPv4(ip4Spec{flagFrag: 100, proto: ProtoUDP, payload: make([]byte, 64)}))); r != ReasonICMPNotAllowed {
		t.Errorf("PutICMPv4TimeExceeded(non-first fragment) = %d, %v", n, r)
	}

	p6 := mkIPv6(ProtoUDP, -1, udp(make([]byte, 1400)))
	p6[7] = 1
	n, r = PutICMPv6TimeExceeded(b, gw6, p6)
	if r != OK || n != 1280 {
		t.Fatalf("PutICMPv6TimeExceeded = %d, %v, want 1280, ok", n, r)
	}
	osrc := IPv6(p6).SrcBytes()
	ref := icmp.Message{Type: ipv6.ICMPTypeTimeExceeded, Body: &icmp.TimeExceeded{Data: p6[:1232]}}
	want, err := ref.Marshal(icmp.IPv6PseudoHeader(net.IP(gw6[:]), net.IP(osrc[:])))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[40:n], want) {
		t.Errorf("ICMPv6 time exceeded = %x..., x/net/icmp marshals %x...", b[40:48], want[:8])
	}
	mc := bytes.Clone(p6)
	mc[24] = 0xff
	if n, r := PutICMPv6TimeExceeded(b, gw6, mc); r != ReasonICMPNotAllowed {
		t.Errorf("PutICMPv6TimeExceeded(multicast destination) = %d, %v", n, r)
	}
	if _, r := PutICMPv6PacketTooBig(b, gw6, mc, 1420); r != OK {
		t.Errorf("PutICMPv6PacketTooBig(multicast destination) = %v, want ok (RFC 4443 §2.4(e.2))", r)
	}
}

// slowDecapECN is RFC 6040 §4.2 Figure 4 as a table, with the kernel's
// WireGuard's choice for the "drop" cell (forward unchanged). Rows: inner;
// columns: outer.
var slowDecapECN = [4][4]uint8{
	ECNNotECT: {ECNNotECT, ECNNotECT, ECNNotECT, ECNNotECT},
	ECNECT1:   {ECNECT1, ECNECT1, ECNECT1, ECNCE},
	ECNECT0:   {ECNECT0, ECNECT1, ECNECT0, ECNCE},
	ECNCE:     {ECNCE, ECNCE, ECNCE, ECNCE},
}

func TestECN(t *testing.T) {
	for in := uint8(0); in < 4; in++ {
		want := in
		if in == ECNCE {
			want = ECNECT0
		}
		if got := EncapECN(0xb8 | in); got != want {
			t.Errorf("EncapECN(%d) = %d, want %d", in, got, want)
		}
		for out := uint8(0); out < 4; out++ {
			p4 := mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(nil)})
			p4[1] = 0xb8 | in // DSCP EF kept
			IPv4(p4).SetChecksum()
			ok := DecapECN(p4, out)
			if ECN(p4) != slowDecapECN[in][out] || p4[1]&^3 != 0xb8 || !IPv4(p4).VerifyChecksum() {
				t.Errorf("DecapECN(IPv4 inner %d, outer %d): tos %#x, checksum ok %v, want ECN %d", in, out, p4[1], IPv4(p4).VerifyChecksum(), slowDecapECN[in][out])
			}
			if wantOK := !(in == ECNNotECT && out == ECNCE); ok != wantOK {
				t.Errorf("DecapECN(inner %d, outer %d) = %v, want %v", in, out, ok, wantOK)
			}
			p6 := mkIPv6(ProtoUDP, -1, udp(nil))
			binary.BigEndian.PutUint32(p6[0:4], 6<<28|uint32(0xb8|in)<<20|0xabcde)
			DecapECN(p6, out)
			if ECN(p6) != slowDecapECN[in][out] || IPv6(p6).TrafficClass()&^3 != 0xb8 || IPv6(p6).FlowLabel() != 0xabcde {
				t.Errorf("DecapECN(IPv6 inner %d, outer %d): %x, want ECN %d", in, out, p6[:4], slowDecapECN[in][out])
			}
		}
	}
}

func mkTCP(flags byte, opts []byte) []byte {
	b := make([]byte, 20+len(opts))
	binary.BigEndian.PutUint16(b[0:2], 40000)
	binary.BigEndian.PutUint16(b[2:4], 80)
	b[12] = byte((20+len(opts))/4) << 4
	b[13] = flags
	copy(b[20:], opts)
	return b
}

func setTCPChecksum(p []byte) {
	var tcp, src, dst []byte
	if p[0]>>4 == 4 {
		tcp, src, dst = p[IPv4(p).HeaderLen():], p[12:16], p[16:20]
	} else {
		tcp, src, dst = p[40:], p[8:24], p[24:40]
	}
	tcp[16], tcp[17] = 0, 0
	binary.BigEndian.PutUint16(tcp[16:18], ^FoldChecksum(Checksum(tcp, PseudoHeaderChecksumBytes(ProtoTCP, src, dst, len(tcp)))))
}

func TestClampMSS(t *testing.T) {
	mss := func(v uint16) []byte { return []byte{2, 4, byte(v >> 8), byte(v)} }
	tests := []struct {
		name    string
		flags   byte
		opts    []byte
		want    uint16 // MSS after; 0: no option
		changed bool
	}{
		{"syn 1460", 0x02, mss(1460), 1380, true},
		{"syn-ack 1460", 0x12, mss(1460), 1380, true},
		{"syn 1200 kept", 0x02, mss(1200), 1200, false},
		{"ack not touched", 0x10, mss(1460), 1460, false},
		{"odd offset", 0x02, cat([]byte{1}, mss(1460), []byte{1, 1, 1}), 1380, true},
		{"after sack-permitted and nops", 0x02, cat([]byte{4, 2, 1, 1}, mss(8960)), 1380, true},
		{"end of list first", 0x02, cat([]byte{0, 0, 0, 0}, mss(1460)), 1460, false},
		{"bad length", 0x02, []byte{3, 9, 0, 0}, 0, false},
	}
	for _, tt := range tests {
		for _, v6 := range []bool{false, true} {
			var p []byte
			if v6 {
				p = mkIPv6(ProtoTCP, -1, mkTCP(tt.flags, tt.opts))
			} else {
				p = mkIPv4(ip4Spec{proto: ProtoTCP, payload: mkTCP(tt.flags, tt.opts)})
			}
			setTCPChecksum(p)
			before := bytes.Clone(p)
			if got := ClampMSS(p, 1380); got != tt.changed {
				t.Errorf("%s (v6 %v): ClampMSS = %v, want %v", tt.name, v6, got, tt.changed)
			}
			if !tt.changed && !bytes.Equal(p, before) {
				t.Errorf("%s (v6 %v): packet changed", tt.name, v6)
			}
			want := bytes.Clone(p)
			setTCPChecksum(want) // the slow way
			if !bytes.Equal(p, want) {
				t.Errorf("%s (v6 %v): TCP checksum %x, want %x", tt.name, v6, p[len(p)-len(tt.opts)-4:len(p)-len(tt.opts)-2], want[len(p)-len(tt.opts)-4:len(p)-len(tt.opts)-2])
			}
			if tt.want != 0 {
				i := bytes.Index(p[len(p)-len(tt.opts):], []byte{2, 4})
				if got := binary.BigEndian.Uint16(p[len(p)-len(tt.opts)+i+2:]); got != tt.want {
					t.Errorf("%s (v6 %v): MSS %d, want %d", tt.name, v6, got, tt.want)
				}
			}
		}
	}
	if got := MSSForMTU(1420, false); got != 1380 {
		t.Errorf("MSSForMTU(1420, v4) = %d", got)
	}
	if got := MSSForMTU(1420, true); got != 1360 {
		t.Errorf("MSSForMTU(1420, v6) = %d", got)
	}
}

// FuzzForwardICMP builds time exceeded and the MTU errors about arbitrary
// bytes: never a panic, never past the limits, and a reply that parses with
// checksums that verify.
func FuzzForwardICMP(f *testing.F) {
	f.Add(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(make([]byte, 100))}))
	f.Add(mkIPv6(ProtoUDP, -1, udp(make([]byte, 100))))
	f.Add(mkIPv6(ProtoDstOpts, -1, cat(ext(ProtoICMPv6, 0), []byte{1, 4, 0, 0, 0, 0, 0, 0})))
	f.Fuzz(func(t *testing.T, p []byte) {
		b := make([]byte, 1500)
		check := func(n int, r Reason, v6 bool) {
			if r != OK {
				return
			}
			var pk Packet
			if pr := ParseIP(b[:n], &pk); pr != OK {
				t.Fatalf("reply does not parse: %v", pr)
			}
			if !v6 && (n > ICMPv4ErrorMaxLen || !ICMPv4(b[20:n]).VerifyChecksum()) {
				t.Fatalf("ICMPv4 reply of %d bytes, checksum ok %v", n, ICMPv4(b[20:n]).VerifyChecksum())
			}
			if v6 && n > ICMPv6ErrorMaxLen {
				t.Fatalf("ICMPv6 reply of %d bytes", n)
			}
		}
		n, r := PutICMPv4TimeExceeded(b, gw4, p)
		check(n, r, false)
		n, r = PutICMPv4FragNeeded(b, gw4, p, 1420)
		check(n, r, false)
		n, r = PutICMPv6TimeExceeded(b, gw6, p)
		check(n, r, true)
		q := bytes.Clone(p)
		if len(q) >= IPv6Len && q[0]>>4 == 6 {
			Forward(q)
			DecapECN(q, ECNCE)
			ClampMSS(q, 1000)
		} else if len(q) >= IPv4MinLen && q[0]>>4 == 4 && IPv4(q).HeaderLen() >= 20 && IPv4(q).HeaderLen() <= len(q) {
			Forward(q)
			DecapECN(q, ECNCE)
			ClampMSS(q, 1000)
		}
	})
}

// parseForwardRef is ParseForward the slow way: ParseL3, then DecapECN and
// Forward, the functions it fuses.
func parseForwardRef(pkt []byte, p *Packet, outerECN uint8) Reason {
	r := ParseL3(pkt, p)
	if r == OK {
		DecapECN(pkt, outerECN)
		Forward(pkt)
	}
	return r
}

// checkParseForward runs ParseForward on a copy of pkt and compares it with
// parseForwardRef: the verdict, the Packet (but Hop) and every byte; then
// UndoHop must give back pkt with only the ECN decapsulation applied.
func checkParseForward(t *testing.T, pkt []byte, outerECN uint8) {
	t.Helper()
	got, want := bytes.Clone(pkt), bytes.Clone(pkt)
	var gp, wp Packet
	gr, wr := ParseForward(got, &gp, outerECN), parseForwardRef(want, &wp, outerECN)
	gp.Hop = 0
	if gr != wr || gp != wp || !bytes.Equal(got, want) {
		t.Fatalf("ParseForward(%x, ECN %d) = %v %+v\n%x\nwant %v %+v\n%x", pkt[:min(len(pkt), 40)], outerECN, gr, gp, got, wr, wp, want)
	}
	if gr != OK {
		if !bytes.Equal(got, pkt) {
			t.Fatalf("ParseForward changed a packet it rejected (%v)", gr)
		}
		return
	}
	got = bytes.Clone(pkt)
	ParseForward(got, &gp, outerECN)
	UndoHop(got, &gp)
	want = bytes.Clone(pkt)
	DecapECN(want, outerECN)
	if !bytes.Equal(got, want) {
		t.Fatalf("UndoHop after ParseForward(%x, ECN %d) = %x, want %x", pkt[:min(len(pkt), 40)], outerECN, got, want)
	}
}

func TestParseForward(t *testing.T) {
	v4 := func(ttl, tos byte, options []byte) []byte {
		p := mkIPv4(ip4Spec{proto: ProtoUDP, options: options, payload: udp([]byte("x"))})
		p[1], p[8] = tos, ttl
		IPv4(p).SetChecksum()
		return p
	}
	for ttl := range 256 {
		for outer := range uint8(4) {
			for _, tos := range []byte{0, 0xb8, 0xb9, 0xba, 0xbb, 0xff} { // every inner ECN, and vary the checksum
				checkParseForward(t, v4(byte(ttl), tos, nil), outer)
				checkParseForward(t, v4(byte(ttl), tos, []byte{1, 1, 1, 0}), outer) // options: the slow path
				p6 := mkIPv6(ProtoUDP, -1, udp(nil))
				binary.BigEndian.PutUint32(p6[0:4], 6<<28|uint32(tos)<<20|0xabcde)
				p6[7] = byte(ttl)
				checkParseForward(t, p6, outer)
			}
		}
	}
	// Every checksum value: the fused update matches Forward's, ±0
	// included, and UndoHop restores a checksum received as 0xffff (−0,
	// which verifies where a fresh computation writes 0) exactly.
	p := v4(9, 0, nil)
	for id := range 1 << 16 {
		binary.BigEndian.PutUint16(p[4:6], uint16(id))
		IPv4(p).SetChecksum()
		checkParseForward(t, p, ECNNotECT)
		if IPv4(p).Checksum() == 0 {
			binary.BigEndian.PutUint16(p[10:12], 0xffff)
			if !IPv4(p).VerifyChecksum() {
				t.Fatalf("id %#x: checksum 0xffff does not verify", id)
			}
			checkParseForward(t, p, ECNNotECT)
		}
	}
	// Rejected: nothing changes.
	bad := v4(64, 0, nil)
	bad[10] ^= 1
	checkParseForward(t, bad, ECNCE)
	checkParseForward(t, bad[:19], ECNNotECT)
}

// FuzzParseForward holds ParseForward to ParseL3 + DecapECN + Forward, and
// UndoHop to an exact inverse of the hop, on arbitrary bytes.
func FuzzParseForward(f *testing.F) {
	f.Add(mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(make([]byte, 10))}), uint8(0))
	f.Add(mkIPv4(ip4Spec{proto: ProtoUDP, options: []byte{1, 1, 1, 0}, payload: udp(nil)}), uint8(3))
	f.Add(mkIPv6(ProtoUDP, -1, udp(make([]byte, 10))), uint8(1))
	f.Fuzz(func(t *testing.T, p []byte, outerECN uint8) {
		checkParseForward(t, p, outerECN&3)
	})
}
