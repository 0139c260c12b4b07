//go:build linux

package compatgw

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestNoWANRoute: what wireguard-go sends to an endpoint the WAN has no
// route to (198.18.50.2: the WAN is 198.18.0.0/24, with no default route)
// is counted on the bind as no_wan_route, as the fast path counts it
// (fastpath.DropNoWANRoute; README "Reading the drop counters"), not as
// no_route, which the LAN side counts for a packet to no peer's allowed
// IPs, nor as no_neighbour; and what it sends to an endpoint on the WAN's
// network that does not answer ARP (198.18.0.77) as no_neighbour, and to
// an IPv6 endpoint, the WAN having no IPv6 address, as no_wan_address (as
// the fast path's), where it was counted nowhere. The peer's persistent
// keepalive has wireguard-go start a handshake at once.
func TestNoWANRoute(t *testing.T) {
	for _, c := range []struct {
		endpoint    string
		want, other string // the reason that must grow, and one that must not
	}{
		{"198.18.50.2:51820", "no_wan_route", "no_neighbour"},
		{"198.18.0.77:51820", "no_neighbour", "no_wan_route"},
		{"[2001:2::2]:51820", "no_wan_address", "no_wan_route"}, // the WAN has no IPv6 address
	} {
		t.Run(c.endpoint, func(t *testing.T) {
			s := newSite(t, func(cfg *Config) {
				cfg.UAPI = "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n" +
					"public_key=" + strings.Repeat("22", 32) + "\nendpoint=" + c.endpoint +
					"\npersistent_keepalive_interval=1\nallowed_ip=198.18.9.0/24\n"
			})
			// drops are the bind's drops by name, as wgpio stats -json
			// shows them.
			drops := func() map[string]uint64 {
				b, err := json.Marshal(s.g.Stats().Bind.Drops)
				if err != nil {
					t.Fatal(err)
				}
				m := map[string]uint64{}
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			var m map[string]uint64
			testenv.PollUntil(15*time.Second, func() bool {
				m = drops()
				return m[c.want] > 0
			})
			if m[c.want] == 0 || m[c.other] != 0 || m["no_route"] != 0 {
				t.Errorf("sends to %s: bind drops %v, want %s only", c.endpoint, m, c.want)
			}
		})
	}
}
