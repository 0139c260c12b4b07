// Package bind is a conn.Bind (golang.zx2c4.com/wireguard/conn) over a
// dataplane port: stock wireguard-go sends and receives its UDP datagrams
// (WireGuard whitepaper §5.4) as raw Ethernet frames on the port's queues,
// without kernel sockets.
//
// The headers it writes and reads are Ethernet II (IEEE 802.3 §3.2), IPv4
// (RFC 791) or IPv6 (RFC 8200) and UDP (RFC 768); UDP checksums follow
// RFC 768 (optional on IPv4) and RFC 8200 §8.1 (mandatory on IPv6). Next
// hops come from an arp.Resolver (routes) and an arp.Table (neighbours) in
// either address mode of ARCHITECTURE.md: shared (the kernel owns the address;
// arp.KernelRoutes, arp.KernelNeighbours, arp.KernelProber) or owned (we
// answer ARP/NDP with an arp.Responder; arp.StaticRoutes, arp.FrameProber
// sending through Bind.SendFrame).
//
// Queues: Open returns one conn.ReceiveFunc per queue of the port, each
// owning that queue's RX half (wireguard-go runs one goroutine per
// function); Send, called from wireguard-go's many sending goroutines,
// takes the first free TX half under a mutex held for the whole batch, so
// nothing is locked per datagram (see Bind).
//
// Checksums: datagrams sent over IPv6 carry a UDP checksum; over IPv4 they
// carry one if Config.ChecksumIPv4 is set and 0 ("none", RFC 768)
// otherwise. Received datagrams: a zero checksum over IPv6 is dropped (RFC
// 8200 §8.1); other checksums are verified only with Config.VerifyChecksum,
// because wireguard-go authenticates every message anyway (Poly1305 tag,
// MAC1). Bad frames are dropped and counted by reason (Bind.Stats), never
// returned as errors.
//
// Outer datagrams longer than the port's MTU are sent as IP fragments, as
// Linux fragments its WireGuard's (Bind.Send; counted in Stats.Fragmented
// and Fragments). Received fragments are not reassembled on the port
// (DropFragment): the XDP filter leaves them to the kernel, which
// reassembles them, and a kernel socket on the Bind's address and port
// (the gateway's, internal/kernelsock) hands each datagram to
// Bind.ReceiveKernel, which queues it (bounded: KernelQueueLen) for the
// receive functions, as a Linux wg0's socket receives it (counted in
// Stats.FromKernel; DropKernelQueueFull when the queue is full).
//
// The port is the caller's: open it with a filter that redirects only UDP
// to the bind's address and port (see XDPFilter), pass it in Config, and
// close it after the wireguard-go device is closed.
package bind
