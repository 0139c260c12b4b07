// Package tunnelmtu holds the start-up checks both gateway modes run on the
// tunnel MTU (package gateway/fastgw's fast path and package
// gateway/compatgw's stock wireguard-go on wgpio's bind): whether a
// full-size tunnel packet with its outer headers fits the WAN MTU whole
// (CheckWAN: a warning, such packets leave as IP fragments, or are
// dropped past the fragments the gateway cuts one into) and fits an
// AF_XDP frame (CheckFrames), with MTUError, the error a caller can report
// at the configuration's MTU key.
//
// Both modes send their outer packets through an AF_XDP port and fragment
// those over the WAN MTU themselves, as a Linux WireGuard interface lets
// the kernel fragment an outer packet over the route's MTU
// (udp_tunnel_xmit_skb with ignore_df). The outer overhead is that of a
// transport data message (WireGuard whitepaper, section 5.4.6) in UDP
// (RFC 768) in IPv4 (RFC 791) or IPv6 (RFC 8200). ARCHITECTURE.md, "The
// outer header".
package tunnelmtu
