// Package kernelsock holds a gateway's kernel UDP sockets on its WAN
// addresses and WireGuard port(s), in shared address mode. The WAN's XDP
// program redirects the UDP datagrams to those addresses and ports to
// AF_XDP, and leaves to the kernel what it cannot take whole: IP
// fragments (RFC 791 §3.2, RFC 8200 §4.5), which the kernel reassembles
// (a peer whose path MTU is below its packets' size sends its datagrams
// fragmented, as Linux's WireGuard does), and datagrams with IPv4
// options or IPv6 extension headers. Without a socket on the port the
// kernel drops them and answers ICMP port unreachable; with one, as
// Linux's wg0 has, they arrive. The readers hand each datagram to the
// gateway's dataplane (fastpath.Engine.ReceiveWAN in fast-path mode,
// bind.Bind.ReceiveKernel in compat mode). Every other datagram the XDP
// program redirects, and the sockets never see it.
//
// Linux only (network namespaces, the gateways): on other systems the
// package holds this documentation alone, so that `go build ./...` passes
// there (README, "Portability").
package kernelsock
