//go:build linux

package compatgw

import (
	"testing"
	"time"
)

// TestLANToWANAddress: a LAN host's packets to an address of the WAN
// interface (SSH, monitoring to the gateway's WAN address) reach the host,
// as Linux delivers them, even where a peer's allowed IPs hold the
// address; here one added while running. Before, the LAN XDP filter left
// the host only the LAN's addresses: such packets went to wireguard-go,
// into that peer's tunnel.
func TestLANToWANAddress(t *testing.T) {
	s := newSite(t)
	if err := s.gw.AddAddr(s.wanDev, "198.18.9.88/32"); err != nil { // in the peer's allowed IPs
		t.Fatal(err)
	}
	var out string
	answered := false
	for end := time.Now().Add(5 * time.Second); !answered && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var err error
		out, err = s.host.Run("ping", "-c", "1", "-W", "1", "198.18.9.88")
		answered = err == nil
	}
	if !answered {
		t.Errorf("after adding 198.18.9.88 to the WAN interface, the LAN host's ping to it was not answered by the host:\n%s", out)
	}
}
