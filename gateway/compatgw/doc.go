// Package compatgw wires wgpio's compat mode together: stock wireguard-go
// (golang.zx2c4.com/wireguard/device), unmodified, with its encrypted side
// on a bind.Bind over an AF_XDP port on the WAN interface and its plaintext
// side on a tundev.PortDevice over an AF_XDP port on the LAN interface. No
// kernel TUN, and no kernel UDP socket but for what the XDP program leaves
// to the kernel (below): frames go between the NIC queues and
// wireguard-go's goroutines. It is the compat-mode counterpart of package
// gateway/fastgw (ARCHITECTURE.md, "Two modes").
//
// Addresses are in the shared mode only (ARCHITECTURE.md, "Addresses and
// neighbours"): the kernel keeps both interfaces' addresses and answers
// ARP/NDP; next hops come from its routes and neighbours (package arp), and
// the WAN's and the LAN's addresses are followed when they change
// (addrs.go). The WAN's XDP program redirects UDP to the WAN addresses and
// ListenPort; the LAN's redirects frames to the peers' allowed IPs (never
// the host's own addresses), kept in step with wireguard-go's
// configuration, wg(8) changes included, and to the prefixes that left
// them, whose packets the LAN's PortDevice drops as no_route
// (prefixes.go; a UAPI set by its difference, setfollow.go), so that the
// host never forwards them by its other routes (a default route out of
// the WAN, in cleartext). The LAN's packets to a peer without an endpoint
// are dropped there too, as no_endpoint, and answered host unreachable,
// for the peers the last sync saw without one (noendpoint.go).
//
// What the WAN's XDP program leaves to the kernel, IP fragments (a peer
// whose WAN or path MTU is below its outer datagrams' size sends them
// fragmented) and datagrams with IPv4 options or IPv6 extension headers,
// reaches wireguard-go as through a Linux wg0's socket: the kernel
// reassembles the fragments for a kernel UDP socket of ours on each WAN
// address and the listen port, whose reader hands the datagram to the
// bind (bind.Bind.ReceiveKernel, counted as from_kernel; kernelsock.go).
// Those sockets follow the listen port and the WAN's addresses; a port
// another socket holds is logged and skipped.
//
// Start must run in the network namespace of the two interfaces (AF_XDP
// sockets and netlink handles keep that namespace afterwards). It needs
// Linux 5.10 or later (README, "Requirements") with XDP on both
// interfaces (native or generic), and root or CAP_NET_ADMIN, CAP_NET_RAW
// and CAP_BPF (plus RLIMIT_MEMLOCK or CAP_IPC_LOCK for the UMEMs).
//
// An interface the gateway runs on deleted while it runs (ip link del, a
// NIC unplugged) is its failure, logged and sent on Gateway.Failed: the
// ports cannot follow a new interface of the same name, so the caller
// closes the gateway and starts it again once the interface is back
// (`wgpio up` exits with status 1 for its service to restart it).
//
// Linux only (AF_XDP, netlink): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package compatgw
