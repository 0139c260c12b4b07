// Package rig is the bench rig behind `go run ./bench`: four network
// namespaces (source host, gateway 1, gateway 2, sink host) joined by veth
// pairs, a WireGuard tunnel between the gateways run by each configuration
// under test in turn (a "gateway kind"), an offered-load sweep from an
// AF_XDP packet generator (package gen) counted at the sink by flow and
// sequence number (package sink), the gateways' CPU time and context
// switches read from procfs (package gwproc), one inner TCP stream, and a
// report: results.json, results.md and one plot per packet size.
//
//	src ──veth── gw1 (under test) ══WireGuard══ gw2 (stock wireguard-go) ──veth── sink
//	198.18.1.2   198.18.1.1 | 198.18.2.1   198.18.2.2 | 198.18.3.1        198.18.3.2
//
// Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking) and exist only
// in the namespaces the rig makes; the tunnel addresses are 198.19.0.1 and
// 198.19.0.2. Gateway 2 is always stock wireguard-go on a kernel TUN (the
// peer), gateway 1 is the configuration under test. Every gateway process
// runs under the same CPU set (taskset) and GOMAXPROCS.
//
// "Clean" is the highest offered rate (as achieved by the generator) with
// under 1% loss; "peak" is the most ever delivered, whatever the loss (the
// definitions of the seed report). The machines this runs on are small and
// shared: compare configurations measured in the same run, by ratio.
//
// Linux only (network namespaces, AF_XDP): on other systems the package
// holds this documentation alone, so that `go build ./...` passes there
// (README, "Portability").
package rig
