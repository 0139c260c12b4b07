//go:build linux

package compatgw

import (
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestWANLinkDown: what wireguard-go sends while the WAN has no carrier
// (the far end of its veth set down; the peer's address pinned in the
// neighbour table, so that the bind sends rather than waits for ARP) is
// dropped by the kernel and counted by the bind as link_down, where it
// was counted as transmitted only.
func TestWANLinkDown(t *testing.T) {
	s := newSite(t, func(c *Config) {
		c.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
			"public_key=" + strings.Repeat("22", 32) + "\nendpoint=198.18.0.2:51820\npersistent_keepalive_interval=1\nallowed_ip=198.18.9.0/24\n"
	})
	mac, err := s.peer.LinkMAC(s.peerDev)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.gw.Run("ip", "neigh", "replace", "198.18.0.2", "lladdr", mac.String(), "dev", s.wanDev, "nud", "permanent"); err != nil {
		t.Fatalf("ip neigh replace: %v\n%s", err, out)
	}
	if out, err := s.peer.Run("ip", "link", "set", s.peerDev, "down"); err != nil {
		t.Fatalf("ip link set down: %v\n%s", err, out)
	}
	// Counted in datagrams sent, not seconds: the next initiation (every
	// Rekey-Timeout, 5 s, and its jitter) is the first without carrier;
	// one may have been on its way when the carrier went, the second
	// must be counted as link_down. A minute bounds only sends stopping.
	const hang = time.Minute
	tx0 := s.g.Stats().Bind.TXPackets
	var st bind.Stats
	if !testenv.PollUntil(hang, func() bool {
		st = s.g.Stats().Bind
		return st.Drops[bind.DropLinkDown] > 0 || st.TXPackets-tx0 >= 2
	}) {
		t.Fatalf("nothing sent within %v of the carrier going: bind drops %v, tx %d", hang, st.Drops.List(), st.TXPackets)
	}
	if st.Drops[bind.DropLinkDown] == 0 || st.Drops[bind.DropNoNeighbour] != 0 {
		t.Errorf("handshakes sent over a WAN without carrier: bind drops %v, tx %d (%d since the carrier went); want link_down only",
			st.Drops.List(), st.TXPackets, st.TXPackets-tx0)
	}
}
