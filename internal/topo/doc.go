// Package topo builds throwaway network topologies for tests, the demo and
// the bench rig: named network namespaces, veth pairs with N queues,
// addresses and routes, and code or commands run inside a namespace.
//
// Every name made here is unique (a caller prefix plus a random suffix, at
// most 15 bytes as IFNAMSIZ requires), so that tests can run in parallel.
// Addresses should come from 198.18.0.0/15 (RFC 2544, benchmarking) and exist
// only inside the namespaces made here. A Topology removes everything it made
// on Close, in reverse order; deleting a namespace deletes the veths in it.
//
// Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Everything
// but Command and Run goes through netlink, netns, ioctl and /proc/sys, so the
// demo needs no tools beyond the Go toolchain.
//
// Linux only (network namespaces, netlink, XDP): on other systems the
// package holds this documentation alone, so that `go build ./...` passes
// there (README, "Portability").
package topo
