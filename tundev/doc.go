// Package tundev provides tun.Device implementations
// (golang.zx2c4.com/wireguard/tun) for stock wireguard-go:
//
//   - MultiQueueTUN, a multi-queue kernel TUN (IFF_MULTI_QUEUE, one reader
//     per queue) that spreads the plaintext side over CPUs without leaving
//     the kernel's TUN driver; its writes never wait for the kernel, and
//     what it or the kernel's TUN queue drops is counted by reason
//     (TUNDropReason); it answers a packet to no peer with host
//     unreachable through raw ICMP sockets (AnswerNoRoute);
//   - OffloadTUN, not a tun.Device but a kernel TUN over wireguard-go's
//     own (its tun package, IFF_VNET_HDR with the TSO and USO offloads)
//     for a fast-path gateway's host traffic: a batch written
//     (WriteBatch, one writer per worker) has each flow's segments
//     coalesced into large packets (GRO), the kernel's large packets are
//     split on Read (GSO), and its writes, like MultiQueueTUN's, never
//     wait for the kernel and count what it refuses by reason;
//   - PortDevice, whose plaintext side is a dataplane port (the gateway's
//     LAN interface, AF_XDP or memport): Read merges the port's queues with
//     a dataplane.Waiter and strips the Ethernet header (IEEE 802.3 §3.2,
//     802.1Q tags included); Write adds one toward the packet's next hop,
//     found through an arp.Resolver and an arp.Table, in either address
//     mode of ARCHITECTURE.md (shared: the kernel owns the LAN address and answers
//     ARP/NDP; owned: an arp.Responder answers ARP, RFC 826, and neighbour
//     solicitations, RFC 4861 §7.2.4, on the device's queues). Both
//     ways it forwards as the Linux router with wg0 it stands in for
//     (router.go: TTL / hop limit, RFC 1812 §5.3.1 and RFC 8200 §3;
//     header's address and option checks; MSS clamp; icmperr.go: time
//     exceeded and parameter problem; mtu.go and lanmtu.go: packets
//     over the MTU of their way out fragmented or answered, RFC 791
//     §3.2, RFC 1191, RFC 8201, the LAN's MTU followed through
//     SetLANMTU), and it hands a written packet for a peer back to
//     wireguard-go's read side (peer to peer, loop.go).
//
// MultiQueueTUN and OffloadTUN are Linux only; see the TUN/TAP documentation in the
// kernel tree (Documentation/networking/tuntap.rst) for IFF_MULTI_QUEUE.
// PortDevice builds and runs wherever package dataplane does (over
// memport on macOS or FreeBSD: README, "Portability").
package tundev
