package header

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// slowChecksum is the obvious RFC 1071 §4.1 loop: big-endian 16-bit words,
// odd byte padded on the right, carries folded at the end. It is the
// reference the fast Checksum is checked against.
func slowChecksum(b []byte, initial uint32) uint32 {
	sum := uint64(initial)
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum>>16 + sum&0xffff
	}
	return uint32(sum)
}

// slowPseudo builds the pseudo-header bytes literally (RFC 768, RFC 8200
// §8.1) and sums them with slowChecksum.
func slowPseudo(proto uint8, src, dst netip.Addr, length int) uint32 {
	var b []byte
	if src.Is4() {
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
		b = append(b, 0, proto, byte(length>>8), byte(length))
	} else {
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
		b = binary.BigEndian.AppendUint32(b, uint32(length))
		b = append(b, 0, 0, 0, proto)
	}
	return slowChecksum(b, 0)
}

func TestChecksumKnownAnswer(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want uint16 // folded sum
	}{
		// RFC 1071 §3 numerical example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
		{"rfc1071", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0xddf2},
		{"empty", nil, 0},
		{"odd byte", []byte{0xab}, 0xab00},
		// The IPv4 header example from Wikipedia "IPv4 header checksum",
		// checksum field b861 included: the sum must be ffff.
		{"ipv4 header", []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}, 0xffff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FoldChecksum(Checksum(tt.in, 0)); got != tt.want {
				t.Errorf("FoldChecksum(Checksum(%x, 0)) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

func TestChecksumAgainstSlow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	// Every length and every start alignment up to a jumbo-ish size, and
	// all-0xff input, which drives every carry.
	ff := make([]byte, 2100)
	for i := range ff {
		ff[i] = 0xff
	}
	for _, src := range [][]byte{buf, ff} {
		for start := 0; start < 8; start++ {
			for n := 0; start+n <= len(src); n += 1 + n/64 {
				b := src[start : start+n]
				for _, init := range []uint32{0, 1, 0xffff, 0xfffffffe, r.Uint32()} {
					got, want := FoldChecksum(Checksum(b, init)), FoldChecksum(slowChecksum(b, init))
					// 0 and ffff are the same ones' complement value.
					if got != want && !(got|want == 0xffff && got&want == 0) {
						t.Fatalf("Checksum(len %d at %d, %#x) = %#04x, want %#04x", n, start, init, got, want)
					}
				}
			}
		}
	}
}

func TestChecksumChains(t *testing.T) {
	b := make([]byte, 301)
	for i := range b {
		b[i] = byte(i * 7)
	}
	whole := FoldChecksum(Checksum(b, 0))
	for cut := 0; cut <= len(b); cut += 2 {
		if got := FoldChecksum(Checksum(b[cut:], Checksum(b[:cut], 0))); got != whole {
			t.Errorf("Checksum(b[%d:], Checksum(b[:%d])) = %#04x, want %#04x", cut, cut, got, whole)
		}
	}
}

func TestPseudoHeaderChecksum(t *testing.T) {
	tests := []struct {
		src, dst string
		proto    uint8
		length   int
	}{
		{"198.18.0.1", "198.18.0.2", ProtoUDP, 8},
		{"255.255.255.255", "255.255.255.255", ProtoUDP, 65535},
		{"0.0.0.0", "0.0.0.0", ProtoTCP, 0},
		{"2001:db8::1", "2001:db8::2", ProtoUDP, 1280},
		{"fe80::1", "ff02::1:ff00:1", ProtoICMPv6, 32},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 255, 70000},
	}
	for _, tt := range tests {
		src, dst := netip.MustParseAddr(tt.src), netip.MustParseAddr(tt.dst)
		want := FoldChecksum(slowPseudo(tt.proto, src, dst, tt.length))
		if got := FoldChecksum(PseudoHeaderChecksum(tt.proto, src, dst, tt.length)); got != want {
			t.Errorf("PseudoHeaderChecksum(%d, %v, %v, %d) = %#04x, want %#04x", tt.proto, src, dst, tt.length, got, want)
		}
		if got := FoldChecksum(PseudoHeaderChecksumBytes(tt.proto, src.AsSlice(), dst.AsSlice(), tt.length)); got != want {
			t.Errorf("PseudoHeaderChecksumBytes(%d, %v, %v, %d) = %#04x, want %#04x", tt.proto, src, dst, tt.length, got, want)
		}
	}
}

func TestUpdateChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 40)
	for i := 0; i < 2000; i++ {
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if i%7 == 0 {
			clear(b[4:]) // many zero words: the -0/+0 corner of RFC 1624 §3
		}
		binary.BigEndian.PutUint16(b[0:2], 0)
		binary.BigEndian.PutUint16(b[0:2], ^FoldChecksum(slowChecksum(b, 0)))
		old := binary.BigEndian.Uint16(b[2:4])
		nw := uint16(r.Uint32())
		if i%5 == 0 {
			nw = 0
		}
		got := UpdateChecksum(binary.BigEndian.Uint16(b[0:2]), old, nw)
		binary.BigEndian.PutUint16(b[2:4], nw)
		if s := FoldChecksum(slowChecksum(b[2:], uint32(got))); s != 0xffff && s != 0 {
			t.Fatalf("UpdateChecksum(%x, %#x, %#x) = %#04x, does not verify (sum %#04x)", b[0:2], old, nw, got, s)
		}
		// Bytes form: rewrite an address-sized run.
		oldA := append([]byte(nil), b[8:24]...)
		newA := make([]byte, 16)
		for j := range newA {
			newA[j] = byte(r.Uint32())
		}
		c := UpdateChecksumBytes(got, oldA, newA)
		copy(b[8:24], newA)
		binary.BigEndian.PutUint16(b[0:2], c)
		if s := FoldChecksum(slowChecksum(b, 0)); s != 0xffff {
			t.Fatalf("UpdateChecksumBytes(%#04x, %x, %x) = %#04x, does not verify (sum %#04x)", got, oldA, newA, c, s)
		}
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{}, uint32(0))                                               // empty
	f.Add([]byte{0xff}, uint32(0))                                           // one odd byte
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint32(0)) // RFC 1071 §3 example
	f.Add(make([]byte, 33), uint32(0xffffffff))                              // unrolled loop plus tail, max initial
	f.Fuzz(func(t *testing.T, b []byte, init uint32) {
		got, want := FoldChecksum(Checksum(b, init)), FoldChecksum(slowChecksum(b, init))
		if got != want && !(got|want == 0xffff && got&want == 0) {
			t.Fatalf("Checksum(%x, %#x) = %#04x, want %#04x", b, init, got, want)
		}
	})
}

var sink uint32

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{64, 512, 1420} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i)
		}
		b.Run(fmt.Sprintf("fast/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			start := cpuTime()
			for b.Loop() {
				sink += Checksum(buf, 0)
			}
			reportCPU(b, start)
		})
		b.Run(fmt.Sprintf("reference/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			start := cpuTime()
			for b.Loop() {
				sink += slowChecksum(buf, 0)
			}
			reportCPU(b, start)
		})
	}
}

func TestPseudoHeaderChecksumMixed(t *testing.T) {
	// Mixed or invalid families must not panic; they use the IPv6 form.
	a4, a6 := netip.AddrFrom4(ip4A), netip.AddrFrom16(ip6B)
	for _, c := range [][2]netip.Addr{{a4, a6}, {a6, a4}, {{}, a4}, {a4, {}}} {
		want := FoldChecksum(slowPseudo(ProtoUDP, netip.AddrFrom16(c[0].As16()), netip.AddrFrom16(c[1].As16()), 8))
		if got := FoldChecksum(PseudoHeaderChecksum(ProtoUDP, c[0], c[1], 8)); got != want {
			t.Errorf("PseudoHeaderChecksum(%v, %v) = %#04x, want %#04x", c[0], c[1], got, want)
		}
	}
}
