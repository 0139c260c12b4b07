//go:build !wgpio_norouter

package fastpath

// routerWork turns on the per-packet work a router does to transit packets
// (router.go): the TTL / hop limit decrement with time exceeded, and ECN
// between the inner and outer headers. It is always on in the product; the
// build tag wgpio_norouter (routerwork_off.go) turns it off only to measure
// its cost on the encrypt and decrypt paths (scripts/routercost.sh). Never
// ship a build with that tag: it forwards TTL-expired packets.
const routerWork = true
