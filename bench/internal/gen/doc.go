// Package gen is the bench rig's packet generator: pre-built Ethernet/IPv4/UDP
// frames (RFC 791, RFC 768) of one size for many inner flows, each carrying
// a run tag, its flow number and a per-flow sequence number in the payload
// (see Payload), transmitted on a dataplane.TX (an AF_XDP queue in the rig,
// a memport in tests) at a fixed rate.
//
// The UDP checksum is zero ("no checksum", allowed for IPv4 by RFC 768), so
// that writing the sequence number needs no checksum update; the IPv4
// header checksum is computed once per flow. The pacing loop sleeps between
// bursts rather than spinning, so that the generator leaves the CPU to the
// gateways under test on a small machine; Report says what rate it
// achieved, so a run shows the generator was not the bottleneck.
package gen
