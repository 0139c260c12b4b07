package fastpath

import (
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/replay"
)

// Defaults of Config.
const (
	// DefaultMTU is the tunnel MTU: the largest inner IP packet carried
	// (1500 − 20 IPv4 − 8 UDP − 32 WireGuard overhead − 20 spare for an
	// IPv6 outer header, as wg-quick picks).
	DefaultMTU = 1420
	// MinMTU is the least tunnel MTU New takes: 576 (every IPv4 host
	// takes datagrams of that size, RFC 791 §3.1), with outer IPv4 or
	// IPv6 alike, as Linux's wg0 takes it: the outer family bounds
	// nothing inside the tunnel (an outer IPv6 packet is the tunnel MTU +
	// 80 bytes, and IPv6 links carry 1280, RFC 8200 §5). Below MinMTU6
	// the tunnel carries no inner IPv6 (DropIPv6Off).
	MinMTU = 576
	// MaxMTU is the largest tunnel MTU New takes: the outer IPv4 packet
	// (20 bytes of header, 8 of UDP, 32 of WireGuard's header and tag)
	// holds 65,535 bytes at most (RFC 791). The ports' frames bound it
	// lower in practice (cmd/wgpio checks that).
	MaxMTU = 65535 - 60
	// MinMTU6 is IPv6's minimum link MTU (RFC 8200 §5): the least tunnel
	// MTU that carries inner IPv6 (below it, none: DropIPv6Off), and the
	// least with an IPv6 tunnel address (gateway/fastgw, as package
	// config requires).
	MinMTU6 = header.IPv6MinMTU
	// DefaultBurst is the number of frames a worker receives at once.
	DefaultBurst = 64
	// MaxBurst is the largest Config.Burst: a burst and the fragments it
	// may split into (up to 7 frames each) are counted per peer in 16-bit
	// fields that keep a peer's outbound state in two cache lines.
	MaxBurst = 4096
	// PublishInterval is how often at most a worker publishes a peer's
	// timer stamps and counters (ARCHITECTURE.md "Timers from stamps").
	PublishInterval = 50 * time.Millisecond
	// DefaultIdleSpin is Config.IdleSpin's default.
	DefaultIdleSpin = 50 * time.Microsecond
	// MaxHeldPerPeer is how many packets a worker holds for a peer that
	// has no usable keypair yet (wireguard-go and the kernel hold 128).
	MaxHeldPerPeer = 128
	// DefaultMaxHeldPerQueue caps held packets over all peers of a worker,
	// so that held frames can never drain the queue's buffers.
	DefaultMaxHeldPerQueue = 1024
	// HandshakeQueueLen is the length of the bounded queue of handshake
	// messages to the control plane; it is "under load" (whitepaper §5.3)
	// while at least an eighth full. 4096, as the kernel's
	// MAX_QUEUED_INCOMING_HANDSHAKES and wireguard-go's QueueHandshakeSize:
	// a reconnect storm's first round arrives faster than the control
	// plane's screening takes it when the CPUs are busy, and what does not
	// fit costs its peer REKEY_TIMEOUT.
	HandshakeQueueLen = 4096
	// MailboxLen is the length of each worker's control-plane mailbox.
	MailboxLen = 1024
)

// Resolver finds the Ethernet address of the next hop toward dst on one
// port (from a route: dst itself when on-link, else its gateway). ok is
// false while unknown; the resolver then starts resolution and the caller
// tries again later. Workers call it only on a miss of their own per-queue
// cache (entries live NeighbourCacheTTL), never per packet; it must be safe
// for concurrent use.
type Resolver interface {
	Resolve(dst netip.Addr) (mac [6]byte, ok bool)
}

// WANRoutes is what a WAN Resolver may implement besides Resolve: HasRoute
// reports whether a route toward dst leads out of the WAN interface. A
// control-plane packet (a handshake message, a cookie reply, a keepalive)
// whose next hop did not resolve in time is then counted as
// DropNoWANRoute when there is no such route, and as DropNoNeighbour when
// the next hop did not answer.
type WANRoutes interface {
	HasRoute(dst netip.Addr) bool
}

// RouteLengths is what a LAN Resolver may implement besides Resolve:
// PrefixLen returns the length in bits of the prefix of its route toward
// dst (the longest that holds dst, whichever interface it leads to), or -1
// when no route covers dst; whether Linux would prefer that route to a
// route of the same prefix into the gateway's wg0 (the exception
// interface, whose routes the gateway adds: gateway/fastgw); and whether
// the route leads elsewhere than the LAN (offLAN: out of another
// interface, the WAN's default route say, or a route that sends nowhere,
// unreachable or blackhole, which the host's kernel acts on; or, with no
// route (-1), a table the resolver does not see that the kernel's rules
// may choose: policy routing). A worker
// weighs it against the allowed-IPs prefix of a decrypted packet's
// destination to decide, as Linux's longest-prefix match over a table
// holding both would, whether the packet goes to the LAN, back into the
// tunnel, or to the host's kernel to forward (hairpin.go). Called on a
// miss of the worker's cache of those decisions (entries live
// NeighbourCacheTTL, and are dropped by a new allowed-IPs snapshot), never
// per packet; it must be safe for concurrent use and allocate nothing. A
// LAN Resolver without it counts as one with no route: every destination a
// peer's allowed IPs hold goes back into the tunnel, every other to the
// LAN. arp.KernelRoutes and arp.StaticRoutes give the routes
// (gateway/fastgw's resolver implements it over them; owned mode's static
// routes all lead to the LAN).
type RouteLengths interface {
	PrefixLen(dst netip.Addr) (bits int, beforeTunnel, offLAN bool)
}

// NeighbourHandler answers ARP (RFC 826) and NDP (RFC 4861) for our own
// addresses in the owned address mode, and learns from what it sees.
// Workers call it for every ARP frame and every ICMPv6 neighbour
// solicitation or advertisement received on its port, and on a port of a
// VLAN (Config.LANVLAN, WANVLAN) every MLD query (RFC 3810 §5.1, behind an
// 8-byte Hop-by-Hop header) — rare frames, off the data path — untagged
// (a worker takes the port's 802.1Q tag off the request and puts it on the
// reply). Handle writes the reply frame, if any,
// into out (at least 128 bytes) and returns its length (0: no reply); it
// must be safe for concurrent use, allocation-free, and must not keep
// either slice.
//
// An arp.Responder does all of this, but its Handle also returns why it
// answered nothing (arp.Reason), so it is not a NeighbourHandler itself: wrap
// it in a type whose Handle drops the reason (ExampleNeighbourHandler), as
// gateway/fastgw does.
type NeighbourHandler interface {
	Handle(frame, out []byte) int
}

// NeighbourCacheTTL is how long a worker trusts a resolved MAC before it
// asks its Resolver again.
const NeighbourCacheTTL = time.Second

// Config configures an Engine.
type Config struct {
	// LAN is the plaintext side, WAN the encrypted side. Queue i of both
	// is driven by worker i; both must have the same number of queues.
	// Required. The engine does not close them.
	LAN, WAN dataplane.Port
	// ListenPort is our WireGuard UDP port on the WAN addresses. Required
	// (not 0).
	ListenPort uint16
	// WANAddr4 / WANAddr6 are our outer addresses, the default sources.
	// At least one is required; the other may be invalid if that family
	// is not used. WANAddr4 must be IPv4 (or IPv4-mapped), WANAddr6 IPv6.
	WANAddr4, WANAddr6 netip.Addr
	// WANAddrs are the WAN's further addresses (optional): datagrams to
	// them are ours too, and a peer whose endpoint's Src is one of them
	// is sent to from it (Engine.SetWAN, wanaddrs.go).
	WANAddrs []netip.Addr
	// MTU is the tunnel MTU (default DefaultMTU; at least MinMTU, with
	// a WANAddr6 too): inner IPv4 packets larger than this without DF
	// are fragmented (RFC 791); the others get ICMP "fragmentation
	// needed" / "packet too big"; below MinMTU6 no IPv6 is carried at
	// all, as on Linux's wg0 (DropIPv6Off; package config warns of it).
	// New does not check it against
	// WAN.MTU(): an outer packet (MTU + tunnelmtu.OuterOverhead4 or 6)
	// larger than the WAN port's MTU is sent as IP fragments, as Linux's
	// WireGuard lets the kernel fragment it (wanfrag.go, Engine.SetWANMTU);
	// gateway/tunnelmtu's CheckWAN warns about it, as gateway/fastgw does.
	MTU int
	// WANResolver and LANResolver find next-hop MACs on each side.
	// Both are required. A LANResolver that is also a RouteLengths
	// decides which decrypted packets go back into the tunnel (peer to
	// peer) and which to the host's kernel through Exception (their
	// route leads out of another interface than the LAN: hairpin.go).
	WANResolver, LANResolver Resolver
	// WANVLAN and LANVLAN are the IEEE 802.1Q VLAN (1-4094) each side
	// runs on, or 0 for untagged frames. A worker takes from a port only
	// frames of its VLAN (with 0: untagged or priority-tagged, VID 0) and
	// drops the others by reason (DropVLAN, DropWANVLAN): the XDP program
	// leaves them to the kernel, so only a port without one (memport)
	// hands them over. What a worker sends on a port carries its tag.
	WANVLAN, LANVLAN uint16
	// LANAddr4 / LANAddr6 are our addresses on the LAN (the source of the
	// ICMP errors we send to LAN hosts, and of those we send into the
	// tunnel without a tunnel address of the family); either may be
	// invalid (no such error of that family is sent). Read by New;
	// SetLANAddrs replaces them.
	LANAddr4, LANAddr6 netip.Addr
	// LANLinkLocal6 is our IPv6 link-local address on the LAN (fe80::/10;
	// another is taken for none): the source of the ICMPv6 errors we
	// send to a LAN host's link-local address, as Linux's source address
	// selection picks the address of the same scope (router.go,
	// lanFrom); invalid: LANAddr6 is their source. Read by New;
	// SetLANLinkLocal replaces it.
	LANLinkLocal6 netip.Addr
	// LANNeighbours and WANNeighbours answer ARP/NDP on each port (owned
	// address mode); nil leaves ARP/NDP to the kernel (shared mode: the
	// XDP program does not redirect them).
	LANNeighbours, WANNeighbours NeighbourHandler
	// Exception receives inner packets addressed to one of TunnelAddrs
	// (our own tunnel addresses) or HostAddrs, and transit packets whose
	// LAN resolver's route leads out of another interface than the LAN
	// (RouteLengths; for the host's kernel to forward, with the TTL /
	// hop limit they came out of the tunnel with), e.g. a TUN to the
	// host kernel; nil drops such transit packets (DropOffLAN). Each
	// worker calls it once per burst with the burst's packets for the
	// host in arrival order (and once per ICMP error to the host):
	// queue is the worker's index (0 to workers-1: state kept per queue
	// is touched by no other worker), pkts inner IP packets in the
	// worker's frames, freed after the call: the callee keeps neither,
	// may change their bytes, and must not wait for the host (the
	// worker's traffic waits with it). Called concurrently, one
	// caller per queue.
	Exception func(queue int, pkts [][]byte)
	// TunnelAddrs are the gateway's own addresses inside the tunnel.
	TunnelAddrs []netip.Addr
	// HostAddrs are the host's other addresses (its LAN and WAN
	// interfaces'). An inner packet from the tunnel to one of them is not
	// transit either: with an Exception it goes there, as the tunnel
	// addresses' do, and the host answers it, as Linux delivers locally
	// what wg0 receives for any of the host's addresses (RFC 1122 §3.3.4.2,
	// the weak host model). Without one it is forwarded toward the LAN
	// like any packet. IPv6 link-local addresses are left out: Linux
	// delivers a packet to one only from its own link (RFC 4007 §9).
	// Read by New; SetHostAddrs replaces them.
	HostAddrs []netip.Addr
	// SourcePorts is the default size of a peer's outer source port range
	// (Peer.SrcPorts), starting at ListenPort (default 1).
	SourcePorts uint16
	// IPv4UDPChecksum computes the checksum of outer IPv4 UDP datagrams.
	// By default they carry none (0, which RFC 768 allows): the WireGuard
	// payload is authenticated by its Poly1305 tag, which catches any
	// corruption a checksum would, and skipping it saves a pass over every
	// packet (about a tenth of the encrypt path at 64 bytes). IPv6 always
	// has one (RFC 8200 §8.1). Received datagrams' checksums are not
	// verified, for the same reason, but for those reassembled from IP
	// fragments (Reassemble), which are checked as the kernel checks the
	// ones it reassembles in shared mode.
	IPv4UDPChecksum bool
	// Burst is the number of frames received at once (0 or less:
	// DefaultBurst; at most MaxBurst, New rejects more).
	Burst int
	// MaxHeldPerQueue caps held packets per worker (default 1024).
	MaxHeldPerQueue int
	// IdleSpin is the longest a worker that owns its OS thread keeps
	// polling its queues after its last work before it blocks (default
	// DefaultIdleSpin; negative: block at once; a shared worker yields
	// instead, see CPUs). Within it the spin adapts (dataplane.Spinner): spins that
	// run out halve it down to dataplane.MinSpin, work found after a gap g
	// raises it to 2g, so
	// that a worker spins through short gaps, which saves a sleep and a
	// wake-up each, and blocks soon in long ones, where spinning would
	// only burn CPU.
	IdleSpin time.Duration
	// CPUs pins worker i to CPUs[i % len(CPUs)] when not empty.
	// Empty leaves the workers to the Go scheduler. A worker owns (and
	// pins) an OS thread only while the process runs no more workers, of
	// all its engines, than GOMAXPROCS; beyond that every worker is
	// shared: an ordinary goroutine, unpinned, that yields to the others
	// while idle and then blocks (threads.go; ARCHITECTURE.md, Threading
	// model). Pin them where the
	// device's transmit runs on the sending CPU (veth, and AF_XDP copy
	// mode generally): a worker that migrates between CPUs under load can
	// then deliver a flow's packets out of order. Linux only
	// (sched_setaffinity(2)): elsewhere New refuses a non-empty CPUs
	// (dataplane.ErrNotSupported).
	CPUs []int
	// Share makes every worker of this engine shared (threads.go) however
	// many Ps the process has: for a program that runs busy goroutines of
	// its own beside the engine on the same Ps, such as an in-process
	// load generator driving it in a closed loop. An owned worker spins
	// on its P and is woken through thread hand-offs, which such a
	// goroutine waits for; a shared one is readied on its waker's P.
	Share bool
	// Now is the clock, ns, monotonic (default: time since engine start).
	Now func() int64
	// Reassemble turns on the reassembly of the WireGuard datagrams that
	// reach the WAN port as IP fragments (the owned address mode, whose
	// XDP filter redirects them, afxdp.Filter.Fragments): reassemble.go,
	// ReassemblyStats. Off, a worker drops a fragment as wan_malformed.
	Reassemble bool

	// ICMPRate (messages per second), ICMPBurst (messages) and
	// ICMPDestInterval limit the ICMP errors the workers send (time
	// exceeded, host unreachable, parameter problem, ICMPv6 beyond scope
	// and no route: every kind but the two below, icmpError.limited), as
	// Linux limits its ICMP errors (net.ipv4.icmp_msgs_per_sec,
	// icmp_msgs_burst, icmp_ratelimit): one global bucket and one per
	// destination (a burst of 6, then one per interval), shared by all
	// workers without a lock (package internal/icmprate). Zero takes
	// Linux's default (1000, 50, 1 s); a negative rate or interval turns
	// that limit off. "Fragmentation needed" and "packet too big" are
	// never limited, as Linux exempts them (icmp_ratemask): path MTU
	// discovery must not break.
	ICMPRate, ICMPBurst int
	ICMPDestInterval    time.Duration
	// ReplayWindow is the width policy of each keypair's replay window
	// (package replay): replay.Auto (the zero value) starts at the
	// kernel's 8,128 counters and widens to 131,008 once the keypair is
	// received on a second queue or reorders by more than 4,064;
	// replay.Narrow and replay.Wide fix the width.
	ReplayWindow replay.Policy
	// MSSClamp, when not 0, lowers the MSS option of TCP SYNs crossing the
	// gateway in both directions (for paths that filter ICMP):
	// MSSClampAuto for the MSS the tunnel MTU carries (MTU − 40 over
	// IPv4, MTU − 60 over IPv6), or a size in bytes.
	MSSClamp int
}

// MSSClampAuto is Config.MSSClamp's "auto".
const MSSClampAuto = -1
