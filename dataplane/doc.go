// Package dataplane moves raw Ethernet frames through NIC queues in bursts,
// in the style of DPDK's rte_eth_rx_burst/rte_eth_tx_burst, over pluggable
// backends: AF_XDP (package dataplane/afxdp) and an in-process pair of ports
// (package dataplane/memport).
//
// A Port is one network interface with N queues. Each Queue has an RX half
// (the RX ring and, on AF_XDP, the fill ring) and a TX half (the TX ring and
// the completion ring). Each half has exactly one owner goroutine at a time;
// the two halves of one queue may have different owners. Nothing on a queue
// is locked per packet: frames move between an owner's private cache and the
// pool's shared free list at most once per burst.
//
// Frames live in a Pool (the UMEM on AF_XDP) and carry headroom, so a later
// layer can prepend outer headers in place, and tailroom, so it can append an
// authentication tag. A Frame value names a buffer of its pool; whoever holds
// the value owns the buffer until it hands it to Transmit or Free. The docs of
// every call say who owns a frame afterwards.
//
// Package dataplane knows nothing of WireGuard.
package dataplane
