// Package inproc is the in-process side of `go run ./bench -inprocess`:
// stock wireguard-go and wgpio measured the same way, in one process and
// one run, without the kernel, so that the architectures' own costs are
// compared rather than the kernel's copies that dominate the namespace rig
// (package rig) on veth.
//
//	generator → gateway A ══ WireGuard ══ gateway B → sink
//
// Configurations (Configs):
//
//   - doubles: the in-memory conn.Bind and tun.Device of the stock
//     configuration alone, a loop per side in place of wireguard-go — their
//     own cost, to subtract from stock's;
//   - ports: wgpio's bind and tundev.PortDevice over memport alone, wired
//     as compat wires them, with the same loops in place of wireguard-go:
//     their own cost, to set beside the doubles';
//   - stock: unmodified wireguard-go (golang.zx2c4.com/wireguard/device),
//     two devices back to back over those doubles: batched at wireguard-go's
//     batch size (conn.IdealBatchSize), no allocation, lock-free rings (one
//     compare-and-swap and one store per batch). wireguard-go's own
//     conn/bindtest and tun/tuntest allocate per packet with a batch size
//     of 1, and would measure themselves;
//   - compat: unmodified wireguard-go on wgpio's bind (WAN) and
//     tundev.PortDevice (LAN) over memport, 1 queue (the doubles' shape:
//     one ring each way), the two gateways sharing one frame pool so that
//     the WAN wire copies nothing: bind's Send copies each datagram into a
//     frame and its receive out of one, as the doubles' Send and receive
//     copy into and out of the peer's ring, the same copies per hop in both
//     (the fast path's WAN wire copies, see memWires);
//   - fastpath-1q, fastpath-2q: two wgpio fast-path engines (package
//     fastpath) with their control plane (package gateway, which runs the
//     real handshake) back to back over memport.
//
// The generator writes inner IPv4/UDP packets (64 flows, a run tag, flow
// and sequence number, a pattern payload) straight into gateway A's input:
// the TUN double's ring, or host A's memport TX (sharing gateway A's frame
// pool, so no copy). The sink reads gateway B's output the same way and
// checks every packet: IPv4 and UDP headers against the flow's template
// (TTL aside; the header checksum verified), the whole payload, the run tag
// and the per-flow sequence number. A packet that is not what was sent
// fails the run. Packets the first gateway's input refuses are lost, as a
// NIC's full RX ring or a TUN's full queue loses them.
//
// Method, per configuration, packet size and CPU count: the process is
// pinned (GOMAXPROCS and sched_setaffinity of every thread) to the first n
// allowed CPUs; fast-path workers are pinned within them. Every
// configuration is built at once, and each size starts with three rounds of
// closed-loop steps taken in turn over the configurations (the median is
// reported), so that all see the same swings of the machine's load. A
// closed-loop step (the generator keeps at most 2048 packets in flight, sent and not yet
// counted by the sink, under every ring's room, so that it never overruns a
// gateway) gives a rate T and the CPU per packet at saturation; paced steps
// then offer T × 0.5, 0.8, 0.95, 1.1, … until two in a row lose
// 10% or more, then bisection. "Clean" is the delivered rate of the paced
// step with the highest offered rate and under 1% loss (the rig's
// definition). Per step: the process's CPU time (getrusage), split between
// gateway A, gateway B, the generator and the sink by the step's CPU
// profile, in which each goroutine carries the pprof label of the side
// that started it (labels are inherited by goroutines; samples without a
// label, such as the garbage collector's background workers, are "other"
// and counted with the gateways); heap allocations (runtime.MemStats
// Mallocs) per delivered packet.
//
// Linux only (sched_setaffinity(2); the reports are package rig's): on
// other systems the package holds this documentation alone, so that `go
// build ./...` passes there (README, "Portability").
package inproc
