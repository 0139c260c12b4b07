package udpframes

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// frame is a 64-byte IPv4/UDP frame from src to dst, with its UDP checksum
// when sum is set.
func frame(src, dst netip.Addr, sum bool) []byte {
	b := make([]byte, 64)
	header.PutEthernet(b, header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2}, header.EtherTypeIPv4)
	ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.As4(), TTL: 64}
	const pl = 64 - header.EthernetLen - header.IPv4MinLen - header.UDPLen
	header.PutIPv4(b[header.EthernetLen:], &ip, header.UDPLen+pl)
	header.PutUDP(b[header.EthernetLen+header.IPv4MinLen:], 1000, 2000, pl)
	if sum {
		u := header.UDP(b[header.EthernetLen+header.IPv4MinLen:])
		u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, u.Length()))
	}
	return b
}

// TestFrames: the generator writes, in turn, exactly the frames it was
// made from (to 1,000 addresses, with and without UDP checksums).
func TestFrames(t *testing.T) {
	src := netip.MustParseAddr("198.19.255.1")
	for _, sum := range []bool{false, true} {
		var frames [][]byte
		for i := range 1000 {
			frames = append(frames, frame(src, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), sum))
		}
		g, err := New(frames)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, g.Len())
		for i := range 2*len(frames) + 3 {
			g.Next(b)
			if want := frames[i%len(frames)]; !bytes.Equal(b, want) {
				t.Fatalf("checksums %v, frame %d:\n% x\nwant\n% x", sum, i, b, want)
			}
		}
	}
}

// TestFramesRefused: frames that differ in more than what the generator
// patches, of two lengths, too short, or none are refused.
func TestFramesRefused(t *testing.T) {
	src, dst := netip.MustParseAddr("198.19.255.1"), netip.MustParseAddr("198.18.0.1")
	a := frame(src, dst, true)
	payload := bytes.Clone(a)
	payload[63] ^= 1
	srcDiffers := frame(netip.MustParseAddr("198.19.255.2"), dst, true)
	for name, frames := range map[string][][]byte{
		"payload":   {a, payload},
		"source":    {a, srcDiffers},
		"length":    {a, a[:60]},
		"too short": {a[:40]},
		"none":      nil,
	} {
		if _, err := New(frames); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}
