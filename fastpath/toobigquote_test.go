package fastpath

import (
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestTooBigQuotesAsArrived: "fragmentation needed" and "packet too big"
// quote the packet with the TTL or hop limit it had when it reached the
// gateway that answers, as Linux's ip_forward and ip6_forward answer
// before they lower it: toward the LAN host for a packet over the tunnel
// MTU (gateway A: TTL 64, as sent), and into the tunnel for a decrypted
// packet over the LAN MTU (gateway B: 63, lowered once by A). Before,
// both quoted it one lower, the hop already taken.
func TestTooBigQuotesAsArrived(t *testing.T) {
	r := newRig(t, rigConfig{lanMTUB: 1280})
	for _, c := range []struct {
		name string
		size int // of the UDP payload
		ttl  uint8
	}{
		{"over the tunnel MTU, at A", 1440 - 28, 64},
		{"over B's LAN MTU", 1400 - 48, 63},
	} {
		for _, v6 := range []bool{false, true} {
			src, dst, size := hostAddrA, hostAddrB, c.size
			if v6 {
				src, dst, size = host6A, host6B, c.size-20
			}
			atB, atA := through(t, r, ttlFrame(t, r, src, dst, size, 64, 0, true))
			if len(atB) != 0 || len(atA) != 1 {
				t.Fatalf("%s, %v: %d frames at hostB, %d at hostA; want 0, 1", c.name, dst, len(atB), len(atA))
			}
			var p header.Packet
			if header.Parse(atA[0], &p) != header.OK {
				t.Fatalf("%s, %v: answer does not parse", c.name, dst)
			}
			q := atA[0][p.L4Off+8:] // the quoted packet
			if v6 {
				if q[7] != c.ttl {
					t.Errorf("%s, %v: the quote's hop limit is %d, want %d", c.name, dst, q[7], c.ttl)
				}
				continue
			}
			if h := header.IPv4(q); h.TTL() != c.ttl || !h.VerifyChecksum() {
				t.Errorf("%s, %v: the quote's TTL is %d (header checksum ok %v), want %d", c.name, dst, h.TTL(), h.VerifyChecksum(), c.ttl)
			}
		}
	}
}
