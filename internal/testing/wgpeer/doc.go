// Package wgpeer runs stock wireguard-go (golang.zx2c4.com/wireguard, the
// version pinned in go.mod, unmodified) as a test peer inside a network
// namespace: a kernel TUN, the standard UDP bind, configuration through its
// own UAPI handler, and a UAPI socket so that wg(8) can show it.
//
// Linux only (network namespaces, TUN): on other systems the package holds
// this documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package wgpeer
