package header

import (
	"net/netip"
	"testing"
)

// TestSourceAddr: the source of an IPv4 and of an IPv6 packet, by the
// version nibble.
func TestSourceAddr(t *testing.T) {
	p4 := make([]byte, IPv4MinLen)
	p4[0] = 0x45
	copy(p4[12:16], []byte{198, 18, 0, 7})
	p6 := make([]byte, IPv6Len)
	p6[0] = 0x60
	want6 := netip.MustParseAddr("2001:2::7")
	a := want6.As16()
	copy(p6[8:24], a[:])
	if got := SourceAddr(p4); got != netip.MustParseAddr("198.18.0.7") {
		t.Errorf("SourceAddr(IPv4) = %v", got)
	}
	if got := SourceAddr(p6); got != want6 {
		t.Errorf("SourceAddr(IPv6) = %v, want %v", got, want6)
	}
}
