package compatgw

import (
	"net/netip"
	"testing"
	"time"
)

// TestWANSecondaryAddress: WireGuard is taken at a further address of the
// WAN (a keepalived virtual address beside the first), as wireguard-go's
// wildcard sockets take it: a datagram to it reaches wireguard-go, the
// first address keeps working, and once the address is removed datagrams
// to it no longer do. (Only the first address of each family was taken:
// the kernel dropped the rest.) That the bind answers a peer from the
// address it reached is bind's TestFurtherAddress.
func TestWANSecondaryAddress(t *testing.T) {
	s := newSite(t)
	virt := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.100"), 51820)
	if err := s.gw.AddAddr(s.wanDev, "198.18.0.100/24"); err != nil {
		t.Fatal(err)
	}
	ok := false
	for end := time.Now().Add(3 * time.Second); !ok && time.Now().Before(end); {
		ok = s.delivered(t, virt, 200*time.Millisecond)
	}
	if !ok {
		t.Fatalf("a datagram to the further WAN address %v did not reach wireguard-go", virt)
	}
	if !s.delivered(t, netip.MustParseAddrPort("198.18.0.1:51820"), 2*time.Second) {
		t.Error("a datagram to the first WAN address did not reach wireguard-go")
	}
	if out, err := s.gw.Run("ip", "addr", "del", "198.18.0.100/24", "dev", s.wanDev); err != nil {
		t.Fatalf("ip addr del: %v\n%s", err, out)
	}
	gone := false
	for end := time.Now().Add(3 * time.Second); !gone && time.Now().Before(end); {
		gone = !s.delivered(t, virt, 300*time.Millisecond)
	}
	if !gone {
		t.Errorf("after %v was removed, datagrams to it still reached wireguard-go", virt.Addr())
	}
	if !s.delivered(t, netip.MustParseAddrPort("198.18.0.1:51820"), 2*time.Second) {
		t.Error("after the removal, a datagram to the first WAN address did not reach wireguard-go")
	}
}
