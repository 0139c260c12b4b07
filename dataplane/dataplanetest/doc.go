// Package dataplanetest is the conformance suite every dataplane backend
// passes, in the style of wireguard-go's conn/bindtest: a backend's tests
// call Run with a factory of port pairs, and the suite checks the semantics
// package dataplane documents.
//
// The factory returns two ports joined so that a frame transmitted on any
// queue of one arrives on some queue of the other: memport's pair, or two
// AF_XDP ports on the two ends of a veth pair in two network namespaces
// (each with its filter redirecting the suite's UDP flows, see Options). The
// suite never assumes which RX queue a frame lands on; it only assumes that
// one flow (one UDP 5-tuple sent from one TX queue) stays on one RX queue,
// so that its frames stay in order.
//
// The suite sends Ethernet/IPv4/UDP frames from Options.AddrA:PortA+f to
// Options.AddrB:PortB+f (f < Options.Flows) and back, with the ports' MAC
// addresses, valid IPv4 header checksums and a zero UDP checksum (allowed
// over IPv4, RFC 768). Reflected frames have their addresses and ports
// swapped.
package dataplanetest
