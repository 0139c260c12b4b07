package header

import (
	"net/netip"
	"testing"
)

// TestMartianSource: the sources Linux's IP input drops in a packet to
// the host, and that PlainUnicast passes none of them.
func TestMartianSource(t *testing.T) {
	for _, c := range []struct {
		src     string
		martian bool
	}{
		{"0.0.0.0", true}, {"0.1.2.3", true}, {"127.0.0.1", true}, {"127.255.0.9", true},
		{"224.0.0.1", true}, {"239.255.255.255", true}, {"255.255.255.255", true},
		{"1.0.0.1", false}, {"126.255.255.255", false}, {"128.0.0.1", false}, {"198.18.0.1", false},
		{"223.255.255.255", false}, {"240.0.0.1", false}, {"255.255.255.254", false},
		{"::", true}, {"::1", true}, {"ff02::1", true}, {"ff0e::5", true}, {"::ffff:198.18.0.1", true}, {"::ffff:127.0.0.1", true},
		{"::2", false}, {"::198.18.0.1", false}, {"64:ff9b::1", false}, {"2001:db8::1", false}, {"fe80::1", false},
		{"fd00::1", false}, {"fec0::1", false},
	} {
		a := netip.MustParseAddr(c.src)
		var p []byte
		if a.Is4() {
			p = make([]byte, IPv4MinLen)
			PutIPv4(p, &IPv4Fields{Protocol: ProtoUDP, Src: a.As4(), Dst: [4]byte{198, 18, 0, 2}, TTL: 64}, 0)
		} else {
			p = make([]byte, IPv6Len)
			PutIPv6(p, &IPv6Fields{NextHeader: ProtoUDP, Src: a.As16(), Dst: netip.MustParseAddr("2001:db8::2").As16(), HopLimit: 64}, 0)
		}
		if got := MartianSource(p); got != c.martian {
			t.Errorf("MartianSource(from %s) = %v, want %v", c.src, got, c.martian)
		}
		if c.martian && PlainUnicast(p) {
			t.Errorf("PlainUnicast(from %s) = true: the hot loops would not ask MartianSource", c.src)
		}
	}
}
