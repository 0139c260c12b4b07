package config

import (
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// File is one parsed configuration file. Zero values mean "not set": the
// gateway applies its defaults (or command-line flags) for them. A File holds
// the private key: it is the caller's to zero (Interface.PrivateKey.Zero) when
// done, and it must not be logged with %v or %+v beyond what the key types'
// String methods redact.
//
// A File is a plain value: safe to read from several goroutines, not to write.
type File struct {
	// Name is the file name given to Parse (or the path given to Load); it
	// prefixes every Error and Warning.
	Name      string
	Interface Interface
	// Peers are in file order.
	Peers []Peer
	WGPIO WGPIO
	// Warnings lists what Parse accepted but will not act on, in file
	// order: at most MaxWarningsPerKind of a kind, then one Warning per
	// kind that had more, saying how many (Warning.More).
	Warnings []Warning
}

// Interface is the [Interface] section (wg(8) and wg-quick(8)).
type Interface struct {
	// PrivateKey is the interface's static Curve25519 private key, as written
	// (not clamped). Required.
	PrivateKey noise.PrivateKey
	// ListenPort is the UDP port to listen on; 0 means unset (a random port).
	ListenPort uint16
	// Addresses are the tunnel addresses (wg-quick's Address), each with its
	// prefix length; an address written without one gets /32 or /128.
	Addresses []netip.Prefix
	// MTU is the tunnel MTU in bytes; 0 means unset.
	MTU int
	// FwMark is the firewall mark (FwMark, as wg(8) reads it: "off", or a
	// number in decimal, 0x hex or 0 octal up to 2^32-1; 0: none). The
	// gateway reports it (wg show) in every mode, but only compat-mqtun's
	// kernel sockets carry it: the other modes send through no socket
	// (README, "fwmark, policy routing and VRFs"). The line is also kept
	// in Unused, so that Marshal and WG write it back as written.
	FwMark uint32
	// Unused holds the wg-quick keys wgpio accepts but does not act on (DNS,
	// Table, PreUp, PostUp, PreDown, PostDown, SaveConfig), each also
	// reported as a Warning; and FwMark, which FwMark holds parsed, with no
	// Warning (only the mode, known after parsing, tells whether a mark is
	// carried). Marshal writes them back.
	Unused []Setting
	// Lines gives the line each key was set on, by canonical key name.
	Lines map[string]int
}

// Setting is one "Key = Value" line kept as text.
type Setting struct {
	Line  int    // 1-based line number in File.Name
	Key   string // canonical spelling, e.g. "PostUp"
	Value string // as written, comments and outer spaces removed
}

// Peer is one [Peer] section.
type Peer struct {
	// Line is the line of the section's [Peer] header.
	Line int
	// PublicKey is the peer's static public key. Required; unique in a File.
	PublicKey noise.PublicKey
	// PresharedKey is the optional pre-shared key; zero means none.
	PresharedKey noise.PresharedKey
	// AllowedIPs are the peer's allowed IPs, masked to their prefix length
	// (what takes effect; a Warning reports host bits that were dropped).
	AllowedIPs []netip.Prefix
	// Endpoint is the peer's address and UDP port; the zero AddrPort means
	// none (the peer's endpoint is learnt from its first authenticated packet).
	// IPv4-mapped IPv6 addresses are unmapped.
	Endpoint netip.AddrPort
	// EndpointHost is the host name the Endpoint was written with, when it
	// was one ("vpn.example.com"), and "" for a literal address. Endpoint then
	// holds the first address the resolver returned.
	EndpointHost string
	// PersistentKeepalive is the persistent keepalive interval in seconds
	// (whitepaper section 6.5); 0 means off.
	PersistentKeepalive uint16
	// KeepaliveOff is set when the peer's section says so:
	// "PersistentKeepalive = 0" (or "off"). WG and Marshal write that line
	// back, as `wg-quick strip` keeps it: with `wg addconf` it turns a
	// running peer's keepalive off, where a peer without the key keeps
	// the one it has.
	KeepaliveOff bool
}

// Mode selects wgpio's data path.
type Mode string

// Modes (the [WGPIO] Mode key).
const (
	ModeFastPath    Mode = "fastpath"     // wgpio's own engine on the NIC queues
	ModeCompat      Mode = "compat"       // stock wireguard-go on wgpio's bind and tundev
	ModeCompatMQTUN Mode = "compat-mqtun" // stock wireguard-go on a multi-queue kernel TUN
)

// AddressMode says who owns a port's addresses (ARCHITECTURE.md, "Addresses and
// neighbours").
type AddressMode string

// Address modes (the [WGPIO] AddressMode key).
const (
	// AddressShared: the host kernel owns the interfaces' addresses and
	// answers ARP/NDP; wgpio follows its neighbours and routes.
	AddressShared AddressMode = "shared"
	// AddressOwned: the kernel has no address on the interfaces; wgpio owns
	// WANAddress and LANAddress and answers ARP/NDP for them.
	AddressOwned AddressMode = "owned"
)

// XDPMode is how the XDP program is attached.
type XDPMode string

// XDP attach modes (the [WGPIO] XDPMode key).
const (
	XDPAuto    XDPMode = "auto"    // native where the driver supports it, else generic
	XDPNative  XDPMode = "native"  // driver mode; fails where unsupported
	XDPGeneric XDPMode = "generic" // skb mode; works on every interface, slower
)

// PortRange is an inclusive range of UDP ports, First <= Last. The zero value
// means unset.
type PortRange struct {
	First, Last uint16
}

// Len returns the number of ports in the range (0 for the zero value).
func (r PortRange) Len() int {
	if r.First == 0 {
		return 0
	}
	return int(r.Last) - int(r.First) + 1
}

// MSSClamp values besides a size in bytes (WGPIO.MSSClamp).
const (
	MSSClampAuto = -1
	MSSClampOff  = -2
)

// ReplayWindow values (WGPIO.ReplayWindow): the width of each session's
// replay window in counters, or auto (package replay's Policy).
const (
	ReplayWindowAuto   = -1
	ReplayWindowNarrow = 8128   // the Linux kernel's width, 1 KiB per session
	ReplayWindowWide   = 131008 // 16 KiB per session
)

// DefaultMetricsPeers is MetricsPeers when unset: 3,000 per-peer series.
const DefaultMetricsPeers = 1000

// MaxMetricsPeers is the largest MetricsPeers accepted.
const MaxMetricsPeers = 1000000

// Off is the value of ICMPRate, ICMPDestInterval and MetricsPeers written
// "off".
const Off = -1

// WGPIO is the [WGPIO] section: wgpio's own settings, which wg-quick does not
// know. Every field is optional; zero means unset.
type WGPIO struct {
	Mode Mode
	// WAN and LAN are the names of the encrypted-side and plaintext-side
	// network interfaces.
	WAN, LAN string
	// WANVLAN and LANVLAN put the WAN or LAN on one VLAN of a trunk: the
	// IEEE 802.1Q VLAN identifier (1-MaxVLANID) whose tagged frames the
	// gateway takes on that interface, and with which it tags what it
	// sends there; 0 means untagged. Frames of other VLANs, and untagged
	// frames where a VLAN is set, are left to the kernel.
	WANVLAN, LANVLAN uint16
	AddressMode      AddressMode
	// Queues is the number of NIC queues (and fast-path workers) per port.
	Queues int
	// CPUs lists the CPUs to pin workers to, in the order written (ranges
	// expanded), without repeats.
	CPUs []int
	// HandshakeWorkers is the number of goroutines that process handshakes
	// (gateway.Options.HandshakeWorkers); 0: one per CPU.
	HandshakeWorkers int
	// SourcePorts is the range of outer UDP source ports; a flow's port is
	// chosen by hashing its inner 5-tuple (ARCHITECTURE.md, "Fast path").
	SourcePorts PortRange
	// WANAddress and LANAddress are the addresses wgpio owns in owned mode,
	// with their on-link prefix length.
	WANAddress, LANAddress netip.Prefix
	// Gateway is the next-hop router on the WAN side in owned mode.
	Gateway netip.Addr
	XDPMode XDPMode
	// MetricsAddress is the host:port to serve Prometheus metrics on; the
	// host may be empty (every address).
	MetricsAddress string
	// MetricsPeers is the most peers for which /metrics exports per-peer
	// series (wgpio_peer_*, one per peer and metric, labelled by public
	// key): with more peers configured it exports none of them, only the
	// totals. Off (-1): never; unset (0): DefaultMetricsPeers. Each series
	// is one Prometheus keeps: at 100,000 peers, 300,000 of them made a
	// scrape cost 1.3-2.4 s of the gateway's CPU and 250-300 MB of garbage.
	MetricsPeers int
	// MSSClamp clamps the MSS option of TCP SYNs crossing the gateway in
	// both directions: MSSClampAuto (the tunnel MTU − 40 for IPv4, − 60
	// for IPv6), MSSClampOff, or a value in bytes (536-65495). Unset is
	// off.
	MSSClamp int
	// ICMPRate and ICMPBurst are the global limit on ICMP time exceeded
	// and destination unreachable errors the gateway sends, in messages
	// per second and messages (Linux net.ipv4.icmp_msgs_per_sec and
	// icmp_msgs_burst; unset: 1000 and 50); ICMPRate Off (-1) removes it.
	// "Fragmentation needed" and "packet too big" are never limited.
	ICMPRate, ICMPBurst int
	// ICMPDestInterval is the least time between such errors to one
	// destination, after a burst of 6 (Linux net.ipv4.icmp_ratelimit;
	// unset: 1 s); -1 (off) removes the limit.
	ICMPDestInterval time.Duration
	// ReplayWindow is the width of each session's replay window:
	// ReplayWindowAuto (start at 8,128 counters, widen to 131,008 when the
	// session is received on two queues or reorders by more than 4,064),
	// ReplayWindowNarrow or ReplayWindowWide. Unset is auto.
	ReplayWindow int
	// Lines gives the line each key was set on, by canonical key name, for
	// the errors found only when the gateway starts (an interface that
	// does not exist, a CPU the process may not run on).
	Lines map[string]int
}
