// Package protocol holds the constants of the WireGuard protocol: message
// types and sizes (whitepaper section 5.4), the transport data layout
// (section 5.4.6) and the limits and timers (section 6).
//
// It is the one home of these numbers: the fast path (fastpath), the replay
// window (replay), the handshake engine (noise) and the control plane
// (gateway) all read them from here. It is a leaf: it imports nothing of
// this module, so that any package, the data path included, may use it.
//
// Only the protocol's own numbers live here. Implementation choices (the
// replay window's width, queue lengths, publish intervals) stay with the
// package that makes them.
//
// The whitepaper is "WireGuard: Next Generation Kernel Network Tunnel",
// J. A. Donenfeld, https://www.wireguard.com/papers/wireguard.pdf; section
// numbers below refer to it.
package protocol
