package noise

import (
	"net/netip"

	"golang.zx2c4.com/wireguard/tai64n"
)

// SetTimestampFunc replaces the TAI64N source of h's initiations (tests only).
func SetTimestampFunc(h *Handshake, f func() tai64n.Timestamp) {
	h.mu.Lock()
	h.timestamp = f
	h.mu.Unlock()
}

var netipAddrPortForTest = netip.MustParseAddrPort("198.18.5.5:5555")
