// Package fastgw wires a wgpio fast-path gateway together: AF_XDP ports on a
// WAN and a LAN interface sharing one UMEM, the fast path's per-queue
// workers (package fastpath), the WireGuard control plane with its UAPI
// socket (package gateway), next hops from the kernel's routes and
// neighbours (package arp, shared address mode), and an exception TUN that
// carries packets for the gateway's own tunnel addresses to and from the
// host kernel.
//
// Start must run in the network namespace of the two interfaces (AF_XDP
// sockets and netlink handles keep that namespace afterwards). It needs
// root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF.
//
// An interface the gateway runs on deleted while it runs (ip link del, a
// NIC unplugged) is its failure, logged and sent on Gateway.Failed: the
// ports cannot follow a new interface of the same name, so the caller
// closes the gateway and starts it again once the interface is back
// (`wgpio up` exits with status 1 for its service to restart it).
//
// Linux only (AF_XDP, netlink, TUN): on other systems the package holds
// this documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package fastgw
