package header

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// reassemble is the slow reference: it puts the fragments of one datagram
// back together by offset (RFC 791 §3.2, reassembly) and returns the
// whole packet with fragment 0's header, its total length and flags as
// the original had them (DF from the fragments, MF and offset from
// origFlags). It fails the test on any rule a fragment breaks.
func reassemble(t *testing.T, frags [][]byte, mtu int, orig []byte) []byte {
	t.Helper()
	oh := IPv4(orig)
	base := oh.FragmentOffset()
	data := make([]byte, 0, len(orig))
	next := base
	for i, fr := range frags {
		h := IPv4(fr)
		if len(fr) > mtu {
			t.Fatalf("fragment %d: %d bytes, mtu %d", i, len(fr), mtu)
		}
		if h.Version() != 4 || h.TotalLength() != len(fr) || !h.VerifyChecksum() {
			t.Fatalf("fragment %d: header %x: bad version, length or checksum", i, fr[:h.HeaderLen()])
		}
		if h.ID() != oh.ID() || h.TTL() != oh.TTL() || h.Protocol() != oh.Protocol() || h.TOS() != oh.TOS() ||
			h.Src() != oh.Src() || h.Dst() != oh.Dst() || h.DontFragment() != oh.DontFragment() {
			t.Fatalf("fragment %d: header %x differs from %x", i, fr[:20], orig[:20])
		}
		if h.FragmentOffset() != next {
			t.Fatalf("fragment %d: offset %d, want %d", i, h.FragmentOffset(), next)
		}
		last := i == len(frags)-1
		if want := !last || oh.MoreFragments(); h.MoreFragments() != want {
			t.Fatalf("fragment %d of %d: MF %v, want %v", i, len(frags), h.MoreFragments(), want)
		}
		d := h.Payload()
		if !last && len(d)%8 != 0 {
			t.Fatalf("fragment %d: %d data bytes, not a multiple of 8", i, len(d))
		}
		if i == 0 {
			if !bytes.Equal(fr[20:h.HeaderLen()], orig[20:oh.HeaderLen()]) {
				t.Fatalf("fragment 0 options %x, want %x", fr[20:h.HeaderLen()], orig[20:oh.HeaderLen()])
			}
		} else if want := slowCopiedOptions(orig[20:oh.HeaderLen()]); !bytes.Equal(fr[20:h.HeaderLen()], want) {
			t.Fatalf("fragment %d options %x, want %x", i, fr[20:h.HeaderLen()], want)
		}
		data = append(data, d...)
		next += len(d)
	}
	whole := append(bytes.Clone(frags[0][:IPv4(frags[0]).HeaderLen()]), data...)
	binary.BigEndian.PutUint16(whole[2:4], uint16(len(whole)))
	copy(whole[6:8], orig[6:8])
	IPv4(whole).SetChecksum()
	return whole
}

// slowCopiedOptions lists the options with the copy flag, one by one, and
// pads them with zeros to a multiple of 4 bytes.
func slowCopiedOptions(o []byte) []byte {
	var out []byte
	for i := 0; i < len(o); {
		switch o[i] {
		case 0:
			i = len(o)
			continue
		case 1:
			i++
			continue
		}
		if i+1 >= len(o) || o[i+1] < 2 || i+int(o[i+1]) > len(o) {
			break
		}
		if o[i]&0x80 != 0 {
			out = append(out, o[i:i+int(o[i+1])]...)
		}
		i += int(o[i+1])
	}
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// fragmentAll runs the Fragmenter as the fast path does: later fragments
// first into buffers of their own, then fragment 0 in place.
func fragmentAll(t *testing.T, p []byte, mtu int) ([][]byte, Reason) {
	var fr IPv4Fragmenter
	if r := fr.Reset(p, mtu); r != OK {
		return nil, r
	}
	out := make([][]byte, fr.Count())
	for i := 1; i < fr.Count(); i++ {
		b := make([]byte, mtu+7)
		n := fr.Put(b, i)
		if n != fr.Len(i) {
			t.Fatalf("Put(%d) = %d, Len = %d", i, n, fr.Len(i))
		}
		out[i] = b[:n]
	}
	n := fr.PutFirst()
	if n != fr.Len(0) {
		t.Fatalf("PutFirst() = %d, Len(0) = %d", n, fr.Len(0))
	}
	out[0] = p[:n]
	return out, OK
}

func TestIPv4Fragmenter(t *testing.T) {
	payload := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i>>8)
		}
		return b
	}
	// Record route (7, not copied), security-shaped option 130 (copied),
	// NOP, a copied option of odd length.
	opts := []byte{7, 7, 4, 0, 0, 0, 0, 1, 130, 4, 0xaa, 0xbb, 0x94, 3, 0xcc, 0}
	tests := []struct {
		name  string
		p     []byte
		mtu   int
		count int
	}{
		{"1500 into 1420", mkIPv4(ip4Spec{proto: ProtoUDP, payload: payload(1480)}), 1420, 2},
		{"4028 into 1420", mkIPv4(ip4Spec{proto: ProtoICMPv4, payload: payload(4008)}), 1420, 3},
		{"fits", mkIPv4(ip4Spec{proto: ProtoUDP, payload: payload(1400)}), 1420, 1},
		{"options", mkIPv4(ip4Spec{proto: ProtoUDP, options: opts, payload: payload(3000)}), 1420, 3},
		{"minimum mtu", mkIPv4(ip4Spec{proto: ProtoUDP, payload: payload(100)}), 68, 3},
		{"first fragment again", mkIPv4(ip4Spec{flagFrag: 0x2000, proto: ProtoUDP, payload: payload(1480)}), 576, 3},
		{"middle fragment again", mkIPv4(ip4Spec{flagFrag: 0x2000 | 185, proto: ProtoUDP, payload: payload(1480)}), 576, 3},
		{"last fragment again", mkIPv4(ip4Spec{flagFrag: 370, proto: ProtoUDP, payload: payload(1000)}), 576, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := bytes.Clone(tt.p)
			frags, r := fragmentAll(t, bytes.Clone(tt.p), tt.mtu)
			if r != OK || len(frags) != tt.count {
				t.Fatalf("fragments = %d, %v, want %d, ok", len(frags), r, tt.count)
			}
			if got := reassemble(t, frags, tt.mtu, orig); !bytes.Equal(got, orig) {
				t.Errorf("reassembled\n%x\nwant\n%x", got, orig)
			}
		})
	}
}

func TestIPv4FragmenterRefuses(t *testing.T) {
	big := mkIPv4(ip4Spec{proto: ProtoUDP, payload: make([]byte, 100)})
	opts := mkIPv4(ip4Spec{proto: ProtoUDP, options: bytes.Repeat([]byte{1}, 40), payload: make([]byte, 100)})
	// A fragment at offset 65,000 with 600 data bytes: its end is past
	// the largest datagram, and its pieces' offsets past what the
	// 13-bit field holds.
	past := mkIPv4(ip4Spec{flagFrag: 65000 / 8, proto: ProtoUDP, payload: make([]byte, 592)})
	end := mkIPv4(ip4Spec{flagFrag: 64912 / 8, proto: ProtoUDP, payload: make([]byte, 592)}) // ends at 65,512: the largest
	tests := []struct {
		name string
		p    []byte
		mtu  int
		want Reason
	}{
		{"mtu below header and 8 bytes", big, 27, ReasonBufferTooSmall},
		{"60-byte header, mtu 67", opts, 67, ReasonBufferTooSmall},
		{"truncated", big[:19], 576, ReasonTruncatedIP},
		{"ipv6", mkIPv6(ProtoUDP, -1, udp(nil)), 576, ReasonBadVersion},
		{"total past slice", big[:80], 60, ReasonLengthExceedsFrame},
		{"fragment past 65,535 bytes", past, 576, ReasonBadTotalLength},
		{"fragment to 65,535 bytes", end, 576, OK},
		{"fragment past 65,535 bytes, whole", past, 1500, OK},
	}
	for _, tt := range tests {
		var f IPv4Fragmenter
		if r := f.Reset(tt.p, tt.mtu); r != tt.want || (r != OK && f.Count() != 0) {
			t.Errorf("%s: Reset = %v (count %d), want %v", tt.name, r, f.Count(), tt.want)
		}
	}
}

// FuzzForwardFragment forwards (TTL − 1) and fragments an IPv4 packet built
// from the input, and checks against the slow reference that the
// fragments reassemble to the original with its TTL lowered by one and its
// checksum fixed.
func FuzzForwardFragment(f *testing.F) {
	f.Add([]byte{}, make([]byte, 1480), uint16(0), uint16(1420), uint8(64)) // 1500 bytes into 1420
	f.Add([]byte{130, 4, 1, 2, 7, 3, 0, 0}, make([]byte, 3000), uint16(0x2000|5), uint16(576), uint8(2))
	f.Add([]byte{1, 1, 1, 0}, make([]byte, 40), uint16(0), uint16(68), uint8(1)) // TTL 1: not forwarded
	f.Fuzz(func(t *testing.T, opts, payload []byte, flagFrag, mtu uint16, ttl uint8) {
		if len(opts) > 40 || len(payload) > 9000 {
			return
		}
		opts = append(bytes.Clone(opts), make([]byte, (4-len(opts)%4)%4)...)
		p := mkIPv4(ip4Spec{flagFrag: flagFrag &^ 0x4000, proto: ProtoUDP, options: opts, payload: payload})
		if IPv4(p).FragmentOffset()+len(payload) > 65535 || len(p) > 65535 {
			return
		}
		p[8] = ttl
		IPv4(p).SetChecksum()
		orig := bytes.Clone(p)
		if !Forward(p) {
			if ttl > 1 || !bytes.Equal(p, orig) {
				t.Fatalf("Forward(ttl %d) = false, packet changed %v", ttl, !bytes.Equal(p, orig))
			}
			return
		}
		want := bytes.Clone(orig)
		want[8] = ttl - 1
		IPv4(want).SetChecksum()
		if !bytes.Equal(p, want) {
			t.Fatalf("Forward: header %x, want %x", p[:20], want[:20])
		}
		frags, r := fragmentAll(t, p, int(mtu))
		if r != OK {
			if int(mtu) >= IPv4(p).HeaderLen()+8 && int(mtu) >= (20+len(slowCopiedOptions(opts)))+8 && len(p) > int(mtu) {
				t.Fatalf("Reset(mtu %d, header %d) = %v", mtu, IPv4(p).HeaderLen(), r)
			}
			return
		}
		if got := reassemble(t, frags, int(mtu), want); !bytes.Equal(got, want) {
			t.Fatalf("reassembled\n%x\nwant\n%x", got, want)
		}
	})
}
