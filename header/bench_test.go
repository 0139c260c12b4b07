package header

import (
	"testing"
)

// frame64 returns a 64-byte Ethernet/IPv4/UDP frame (22 bytes of payload)
// or, for v6, an Ethernet/IPv6/UDP frame with the same payload.
func frame64(v6 bool) []byte {
	pl := make([]byte, 22)
	if v6 {
		u := udp(pl)
		return cat(ethHdr(-1, EtherTypeIPv6), mkIPv6(ProtoUDP, -1, u))
	}
	return cat(ethHdr(-1, EtherTypeIPv4), mkIPv4(ip4Spec{proto: ProtoUDP, payload: udp(pl)}))
}

// parseBuild is the hot path's use of the package on one frame: parse the
// received frame, then write new Ethernet/IP/UDP headers in front of its
// payload in out (as the fast path does in a frame's headroom).
func parseBuild(frame, out []byte, p *Packet, f4 *IPv4Fields, f6 *IPv6Fields) Reason {
	if r := Parse(frame, p); r != OK {
		return r
	}
	n := PutEthernet(out, macB, macA, p.EtherType)
	if p.IPVersion == 4 {
		n += PutIPv4(out[n:], f4, UDPLen+p.PayloadLen)
	} else {
		n += PutIPv6(out[n:], f6, UDPLen+p.PayloadLen)
	}
	PutUDP(out[n:], p.DstPort, p.SrcPort, p.PayloadLen)
	return OK
}

var (
	tmpl4 = IPv4Fields{TTL: 64, Protocol: ProtoUDP, DontFragment: true, Src: ip4A, Dst: ip4B}
	tmpl6 = IPv6Fields{NextHeader: ProtoUDP, HopLimit: 64, Src: ip6A, Dst: ip6B}
)

func TestNoAllocs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		frame := frame64(v6)
		out := make([]byte, 128)
		var p Packet
		allocs := testing.AllocsPerRun(1000, func() {
			if r := parseBuild(frame, out, &p, &tmpl4, &tmpl6); r != OK {
				t.Fatalf("parseBuild(v6=%v) = %v", v6, r)
			}
			ps := PseudoHeaderChecksum(ProtoUDP, p.Src, p.Dst, UDPLen+p.PayloadLen)
			UDP(frame[p.L4Off:p.L3End]).VerifyChecksum(ps)
			_ = p.Src.Is4()
		})
		if allocs != 0 {
			t.Errorf("parse+build UDP (v6=%v): %v allocs, want 0", v6, allocs)
		}
	}
	off := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp(make([]byte, 1400))})
	off6 := mkIPv6(ProtoUDP, -1, udp(make([]byte, 1400)))
	out := make([]byte, 1500)
	allocs := testing.AllocsPerRun(100, func() {
		PutICMPv4FragNeeded(out, gw4, off, 1420)
		PutICMPv6PacketTooBig(out, gw6, off6, 1420)
	})
	if allocs != 0 {
		t.Errorf("ICMP builders: %v allocs, want 0", allocs)
	}
}

func benchParseBuild(b *testing.B, v6 bool) {
	frame := frame64(v6)
	out := make([]byte, 128)
	var p Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if parseBuild(frame, out, &p, &tmpl4, &tmpl6) != OK {
			b.Fatal("parse failed")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
}

// BenchmarkParseBuild is parse + Ethernet/IP/UDP build of a 64-byte frame
// (target ≤ 15 ns/op, 0 allocs for UDP/IPv4).
func BenchmarkParseBuild(b *testing.B) {
	b.Run("udp4", func(b *testing.B) { benchParseBuild(b, false) })
	b.Run("udp6", func(b *testing.B) { benchParseBuild(b, true) })
}

func BenchmarkParse(b *testing.B) {
	frame := frame64(false)
	var p Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		Parse(frame, &p)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pps")
}

func BenchmarkICMPv4FragNeeded(b *testing.B) {
	off := mkIPv4(ip4Spec{flagFrag: 0x4000, proto: ProtoUDP, payload: udp(make([]byte, 1472))})
	out := make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		PutICMPv4FragNeeded(out, gw4, off, 1420)
	}
}
