package header

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// scratchIPv4UDP builds the 42 bytes of an untagged Ethernet, IPv4 and
// UDP header field by field (RFC 791 §3.1, RFC 768), with the IPv4 header
// checksum summed word by word (RFC 1071), for comparison with a
// template's output.
func scratchIPv4UDP(c UDPTemplateConfig, srcPort uint16, payloadLen int, id uint16, tos uint8) []byte {
	b := make([]byte, 42)
	copy(b[0:6], c.Dst[:])
	copy(b[6:12], c.Src[:])
	binary.BigEndian.PutUint16(b[12:14], 0x0800)
	ip := b[14:34]
	ip[0], ip[1] = 0x45, tos
	binary.BigEndian.PutUint16(ip[2:4], uint16(20+8+payloadLen))
	binary.BigEndian.PutUint16(ip[4:6], id)
	if c.DontFragment {
		ip[6] = 0x40
	}
	ip[8] = c.TTL
	if ip[8] == 0 {
		ip[8] = 64
	}
	ip[9] = 17
	s4, d4 := c.SrcAddr.As4(), c.DstAddr.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	u := b[34:42]
	binary.BigEndian.PutUint16(u[0:2], srcPort)
	binary.BigEndian.PutUint16(u[2:4], c.DstPort)
	binary.BigEndian.PutUint16(u[4:6], uint16(8+payloadLen))
	return b
}

// TestUDPTemplatePutIPv4WithScratch holds PutIPv4With (and Put, its
// identification and ECN 0 case) to headers built from scratch, for random
// templates (TOS, TTL, DF, addresses, ports), lengths, identifications and
// ECN values, and for identifications chosen so that the header's sum
// folds to 0xffff (checksum 0x0000) or would without the end-around
// carry. A template whose TOS has ECN bits set keeps them: ecn is ORed
// into the field, and the checksum must cover the bits as stored.
func TestUDPTemplatePutIPv4WithScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20000 {
		var c UDPTemplateConfig
		for i := range c.Dst {
			c.Dst[i], c.Src[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		c.VLANID = -1
		var a, d [4]byte
		binary.BigEndian.PutUint32(a[:], rng.Uint32())
		binary.BigEndian.PutUint32(d[:], rng.Uint32())
		c.SrcAddr, c.DstAddr = netip.AddrFrom4(a), netip.AddrFrom4(d)
		c.DstPort = uint16(rng.Uint32())
		c.TOS = byte(rng.Uint32())
		if round%2 == 0 {
			c.TOS &^= 3 // the usual template: ECN not set
		}
		c.TTL = byte(rng.Uint32())
		c.DontFragment = rng.IntN(2) == 0
		tm, ok := NewUDPTemplate(c)
		if !ok {
			t.Fatal("NewUDPTemplate = false")
		}
		plen := rng.IntN(65535 - 28 + 1)
		sport := uint16(rng.Uint32())
		ecn := uint8(rng.IntN(4))
		id := uint16(rng.Uint32())
		switch round % 5 {
		case 1, 2: // the identification that makes the sum 0xffff: checksum 0
			base := scratchIPv4UDP(c, sport, plen, 0, c.TOS|ecn)
			s := ^binary.BigEndian.Uint16(base[24:26]) // the sum without id
			id = 0xffff - s
			if round%5 == 2 && s == 0 {
				id = 0xffff
			}
		case 3:
			id = 0xffff
		}
		want := scratchIPv4UDP(c, sport, plen, id, c.TOS|ecn)
		got := make([]byte, 42+plen)
		if !tm.PutIPv4With(got, sport, plen, id, ecn) {
			t.Fatal("PutIPv4With = false for an untagged IPv4 template")
		}
		if !bytes.Equal(got[:42], want) {
			t.Fatalf("TOS %#x, payload %d, id %#x, ECN %d:\n got % x\nwant % x", c.TOS, plen, id, ecn, got[:42], want)
		}
		if !ipv4HeaderSumOK(got[14:34]) {
			t.Fatalf("TOS %#x, payload %d, id %#x, ECN %d: the header's checksum does not verify", c.TOS, plen, id, ecn)
		}
		want = scratchIPv4UDP(c, sport, plen, 0, c.TOS)
		if n := tm.Put(got, sport, plen); n != 42 || !bytes.Equal(got[:42], want) {
			t.Fatalf("Put: TOS %#x, payload %d:\n got % x\nwant % x", c.TOS, plen, got[:42], want)
		}
	}
}
