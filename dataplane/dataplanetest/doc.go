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
//
// A backend's test calls Run with its factory, for example (AF_XDP over a
// veth pair, where the kernel path drops instead of pushing back and is
// slower than memory):
//
//	func TestConformance(t *testing.T) {
//		opts := dataplanetest.Options{Lossy: true, Frames: 100_000}
//		dataplanetest.Run(t, func(t *testing.T, queues int) (a, b dataplane.Port) {
//			// First call: make the namespaces and a veth pair with
//			// queues queues, removed by t.Cleanup. Every call: open
//			// one port on each end, redirecting opts' UDP flows.
//			return openA(t, queues), openB(t, queues)
//		}, opts)
//	}
//
// What the suite asks beyond package dataplane's docs: the ports implement
// dataplane.Accounter; after Close, Receive, Alloc and Transmit return 0 and
// frames held across Close can still be freed; Transmit takes and drops a
// frame longer than MTU + 14 bytes (untagged), counting DropTooLong on the
// sending port. A factory that needs a fresh pair of interfaces per queue
// count may key them by queues.
package dataplanetest
