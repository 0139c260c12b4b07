// Package arp resolves and answers for neighbours on Ethernet: ARP for IPv4
// (RFC 826) and the neighbour solicitation and advertisement messages of IPv6
// Neighbor Discovery (RFC 4861 §4.3, §4.4, validated as in §7.1.1 and
// §7.1.2), with duplicate address detection (RFC 4862 §5.4).
//
// It works on byte slices and knows nothing of queues: whoever owns a queue
// hands frames to a Responder and transmits the frames it writes into a
// caller-provided buffer. The pieces:
//
//   - ParseARP, ParseNDP, ARP.Marshal, NDP.Marshal: the codecs, on whole
//     untagged Ethernet II frames (strip an 802.1Q tag before, re-add after).
//   - Responder: answers ARP requests and neighbour solicitations for our
//     own addresses (owned mode), announces them (gratuitous ARP, unsolicited
//     NA), runs duplicate address detection, and feeds what it learns to a
//     Table.
//   - Table: the neighbour cache with states in the manner of RFC 4861 §7.3.2
//     (incomplete, reachable, stale, probe, failed). Lookup takes no lock: it
//     reads an immutable snapshot published through an atomic pointer.
//     Updates, expiry and requests run off the hot path.
//   - Holder: a per-queue, fixed-size place for frames waiting for a
//     neighbour to resolve, so that waiting frames never drain a queue.
//   - StaticRoutes (owned mode) and KernelRoutes / KernelNeighbours (shared
//     mode, read from the kernel through netlink and followed): next hops
//     from routes, so that an endpoint that is not on-link is reached
//     through its gateway's MAC.
//
// Owned mode starts in this order (see Example_ownedMode): make the Table
// with a FrameProber, the Responder, join the solicited-node groups
// (JoinGroups, which MLD announces; or let the XDP program pass
// 33:33:ff:xx:xx:xx, behind no MLD-snooping switch),
// start the queue loop that hands frames to Responder.Handle, run
// Responder.DAD (RFC 4862 §5.4), then Responder.Announce (gratuitous ARP,
// unsolicited NA). Shared mode needs no responder: KernelNeighbours mirrors
// the kernel's neighbours into a Table whose Prober is a KernelProber, and
// KernelRoutes gives the next hops.
//
// Not done: 802.1Q tags (strip before, add after), IPv4 address conflict
// detection probes (RFC 5227 §2.1; conflicts are still noticed and
// reported), NS/NA behind IPv6 extension headers, router
// advertisements and redirects.
//
// The two address modes are those of ARCHITECTURE.md "Addresses and neighbours":
// shared (the kernel owns the address and answers ARP/NDP; we mirror its
// neighbour and route tables) and owned (we answer and resolve ourselves).
package arp
