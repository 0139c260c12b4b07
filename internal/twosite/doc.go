// Package twosite builds the two-site topology that `wgpio demo`, the
// examples' tests and the interop tests share:
//
//	hostA ── gwA (wgpio fast path, AF_XDP) ══ [router] ══ gwB (stock wireguard-go) ── hostB
//
// Every address is in 198.18.0.0/15 (RFC 2544) or, for IPv6, in
// 2001:db8::/32 (RFC 3849), and lives only inside the namespaces the
// topology makes: their names start with the topology's prefix (`wgpio
// demo`'s: "wgd"), the gateways' with "wgpa" (wgpio) and "wgsb" (stock
// wireguard-go).
//
// Linux only (network namespaces, AF_XDP): on other systems the package
// holds this documentation alone, so that `go build ./...` passes there
// (README, "Portability").
package twosite
