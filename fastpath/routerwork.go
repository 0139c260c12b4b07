//go:build !wgpio_norouter

package fastpath

import "github.com/wgpio/wgpio/header"

// routerWork turns on the per-packet work a router does to transit packets
// (router.go): the TTL / hop limit decrement with time exceeded, and ECN
// between the inner and outer headers. It is always on in the product; the
// build tag wgpio_norouter (routerwork_off.go) turns it off only to measure
// its cost on the encrypt and decrypt paths (scripts/routercost.sh). Never
// ship a build with that tag: it forwards TTL-expired packets.
const routerWork = true

// parseInner parses the IP header of a decrypted packet p and does to it, in
// the same step, what the decapsulation (the outer ECN field ecn, RFC 6040)
// and a router's hop (TTL / hop limit − 1) do: header.ParseForward.
func parseInner(p []byte, pkt *header.Packet, ecn uint8) header.Reason {
	return header.ParseForward(p, pkt, ecn)
}
