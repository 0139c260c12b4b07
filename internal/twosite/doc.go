// Package twosite builds the two-site topology that `wgpio demo`, the
// examples' tests and the interop tests share:
//
//	hostA ── gwA (wgpio fast path, AF_XDP) ══ [router] ══ gwB (stock wireguard-go) ── hostB
//
// Every address is in 198.18.0.0/15 (RFC 2544) and lives only inside the
// namespaces the topology makes.
//
// Linux only (network namespaces, AF_XDP): on other systems the package
// holds this documentation alone, so that `go build ./...` passes there
// (README, "Portability").
package twosite
