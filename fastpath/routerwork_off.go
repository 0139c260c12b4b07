//go:build wgpio_norouter

package fastpath

import "github.com/wgpio/wgpio/header"

// routerWork is off in this build: see routerwork.go. Only
// scripts/routercost.sh builds with the tag wgpio_norouter, to measure what
// the router work costs; such a build forwards TTL-expired packets and
// carries no ECN, so its tests of router behaviour fail by design.
const routerWork = false

// parseInner parses the IP header of a decrypted packet p, and nothing more.
func parseInner(p []byte, pkt *header.Packet, _ uint8) header.Reason { return header.ParseL3(p, pkt) }
