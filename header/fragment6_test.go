package header

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// reassemble6 is the slow reference for IPv6 (RFC 8200 §4.5, reassembly):
// it checks every rule a fragment of orig must keep and returns the packet
// put back together.
func reassemble6(t testing.TB, frags [][]byte, mtu int, orig []byte, id uint32) []byte {
	t.Helper()
	var data []byte
	for i, fr := range frags {
		if len(fr) > mtu || len(fr) < IPv6Len+8 {
			t.Fatalf("fragment %d: %d bytes, mtu %d", i, len(fr), mtu)
		}
		if plen := int(binary.BigEndian.Uint16(fr[4:6])); plen != len(fr)-IPv6Len {
			t.Fatalf("fragment %d: payload length %d of %d bytes", i, plen, len(fr))
		}
		if fr[6] != ProtoFragment || !bytes.Equal(fr[:4], orig[:4]) || !bytes.Equal(fr[7:IPv6Len], orig[7:IPv6Len]) {
			t.Fatalf("fragment %d: header %x, packet's %x", i, fr[:IPv6Len], orig[:IPv6Len])
		}
		fh := fr[IPv6Len : IPv6Len+8]
		om := binary.BigEndian.Uint16(fh[2:4])
		if fh[0] != orig[6] || fh[1] != 0 || om&6 != 0 || binary.BigEndian.Uint32(fh[4:8]) != id {
			t.Fatalf("fragment %d: fragment header %x (next %d, id %#x)", i, fh, orig[6], id)
		}
		if off := int(om &^ 7); off != len(data) {
			t.Fatalf("fragment %d: offset %d, want %d", i, off, len(data))
		}
		last := i == len(frags)-1
		if m := om&1 != 0; m == last {
			t.Fatalf("fragment %d of %d: M %v", i, len(frags), m)
		}
		d := fr[IPv6Len+8:]
		if !last && len(d)%8 != 0 {
			t.Fatalf("fragment %d: %d data bytes, not a multiple of 8", i, len(d))
		}
		data = append(data, d...)
	}
	whole := append(bytes.Clone(orig[:IPv6Len]), data...)
	return whole
}

// fragment6All cuts p with an IPv6Fragmenter, fragment 0 in place (moved 8
// bytes into the headroom before p in buf, as a frame's) or, with
// ownFirst, into a buffer of its own.
func fragment6All(t testing.TB, buf []byte, mtu int, id uint32, ownFirst bool) ([][]byte, Reason) {
	t.Helper()
	p := buf[IPv6FragmentLen:]
	var fr IPv6Fragmenter
	if r := fr.Reset(p, mtu, id); r != OK {
		return nil, r
	}
	if fr.Count() == 1 {
		return [][]byte{p[:fr.Len(0)]}, OK
	}
	out := make([][]byte, fr.Count())
	for i := 1; i < fr.Count(); i++ {
		b := make([]byte, fr.Len(i)+7)
		if n := fr.Put(b, i); n != fr.Len(i) {
			t.Fatalf("Put(%d) = %d, Len %d", i, n, fr.Len(i))
		}
		out[i] = b[:fr.Len(i)]
	}
	first := buf
	if ownFirst {
		first = make([]byte, fr.Len(0))
	}
	if n := fr.PutFirst(first); n != fr.Len(0) {
		t.Fatalf("PutFirst = %d, Len %d", n, fr.Len(0))
	}
	out[0] = first[:fr.Len(0)]
	return out, OK
}

// udp6 is an IPv6 UDP packet of n bytes of payload with headroom for the
// Fragment header before it.
func udp6(rng *rand.Rand, n int) []byte {
	buf := make([]byte, IPv6FragmentLen+IPv6Len+UDPLen+n)
	p := buf[IPv6FragmentLen:]
	binary.BigEndian.PutUint32(p[0:4], 6<<28|0xb8<<20|0x12345)
	binary.BigEndian.PutUint16(p[4:6], uint16(UDPLen+n))
	p[6], p[7] = ProtoUDP, 64
	for i := 8; i < len(p); i++ {
		p[i] = byte(rng.Uint32())
	}
	return buf
}

func TestIPv6Fragmenter(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 8200))
	for _, n := range []int{0, 1, 1000, 1232, 1233, 1240, 1452, 1500, 3000, 9000, 65527} {
		for _, mtu := range []int{1280, 1400, 1492, 1500, 9000} {
			for _, own := range []bool{false, true} {
				buf := udp6(rng, n)
				orig := bytes.Clone(buf[IPv6FragmentLen:])
				id := rng.Uint32()
				frags, r := fragment6All(t, buf, mtu, id, own)
				if r != OK {
					t.Fatalf("payload %d, mtu %d: %v", n, mtu, r)
				}
				if len(orig) <= mtu {
					if len(frags) != 1 || !bytes.Equal(frags[0], orig) {
						t.Fatalf("payload %d, mtu %d: a packet that fits was changed", n, mtu)
					}
					continue
				}
				want := (len(orig) - IPv6Len + (mtu-48)&^7 - 1) / ((mtu - 48) &^ 7)
				if len(frags) != want {
					t.Fatalf("payload %d, mtu %d: %d fragments, want %d", n, mtu, len(frags), want)
				}
				if got := reassemble6(t, frags, mtu, orig, id); !bytes.Equal(got[IPv6Len:], orig[IPv6Len:]) {
					t.Fatalf("payload %d, mtu %d, own buffer %v: reassembled data differ", n, mtu, own)
				}
			}
		}
	}
}

func TestIPv6FragmenterRefuses(t *testing.T) {
	good := udp6(rand.New(rand.NewPCG(1, 2)), 2000)[IPv6FragmentLen:]
	with := func(i int, v byte) []byte { p := bytes.Clone(good); p[i] = v; return p }
	for _, c := range []struct {
		name string
		p    []byte
		mtu  int
		want Reason
	}{
		{"short", good[:39], 1280, ReasonTruncatedIP},
		{"IPv4", with(0, 0x45), 1280, ReasonBadVersion},
		{"payload past the buffer", good[:1000], 1280, ReasonLengthExceedsFrame},
		{"already a fragment", with(6, ProtoFragment), 1280, ReasonFragment},
		{"hop-by-hop first", with(6, ProtoHopByHop), 1280, ReasonBadExtensionHeader},
		{"routing first", with(6, ProtoRouting), 1280, ReasonBadExtensionHeader},
		{"mtu below 56", good, 55, ReasonBufferTooSmall},
	} {
		var fr IPv6Fragmenter
		if r := fr.Reset(c.p, c.mtu, 1); r != c.want || fr.Count() != 0 {
			t.Errorf("%s: Reset = %v with %d fragments, want %v and 0", c.name, r, fr.Count(), c.want)
		}
	}
	var fr IPv6Fragmenter
	if r := fr.Reset(good, 56, 1); r != OK || fr.Len(0) != 56 {
		t.Errorf("mtu 56: %v, first fragment %d bytes", r, fr.Len(0))
	}
}

func TestIPv6FragmenterAllocs(t *testing.T) {
	buf := udp6(rand.New(rand.NewPCG(3, 4)), 1452)
	pkt := bytes.Clone(buf)
	second := make([]byte, 2000)
	var fr IPv6Fragmenter
	if a := testing.AllocsPerRun(100, func() {
		copy(buf, pkt)
		fr.Reset(buf[IPv6FragmentLen:], 1280, 7)
		fr.Put(second, 1)
		fr.PutFirst(buf)
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}

// FuzzIPv6Fragmenter cuts arbitrary packets at arbitrary MTUs: Reset never
// panics, and what it accepts reassembles to the packet.
func FuzzIPv6Fragmenter(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	f.Add(udp6(rng, 1452), uint16(1280), uint32(1), false)
	f.Add(udp6(rng, 100), uint16(60), uint32(2), true)
	f.Add([]byte{0x60}, uint16(1280), uint32(3), false)
	f.Fuzz(func(t *testing.T, b []byte, mtu uint16, id uint32, own bool) {
		if len(b) < IPv6FragmentLen {
			return
		}
		buf := bytes.Clone(b)
		orig := bytes.Clone(buf[IPv6FragmentLen:])
		frags, r := fragment6All(t, buf, int(mtu), id, own)
		if r != OK {
			return
		}
		plen := int(binary.BigEndian.Uint16(orig[4:6]))
		orig = orig[:IPv6Len+plen]
		if len(frags) == 1 {
			if !bytes.Equal(frags[0], orig) {
				t.Fatal("a packet that fits was changed")
			}
			return
		}
		if got := reassemble6(t, frags, int(mtu), orig, id); !bytes.Equal(got[IPv6Len:], orig[IPv6Len:]) {
			t.Fatal("reassembled data differ")
		}
	})
}
