package fastpath

import (
	"sync/atomic"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/counts"
)

// DropReason says why a worker dropped a packet. Every packet a worker
// drops is counted under exactly one reason.
type DropReason uint8

// Drop reasons.
const (
	// DropMalformed: a LAN frame or inner packet that does not parse
	// (runt, bad lengths, bad IPv4 header checksum, ...).
	DropMalformed DropReason = iota
	// DropNotIP: a LAN frame that is neither IPv4 nor IPv6.
	DropNotIP
	// DropNoRoute: no peer's allowed IPs contain the inner destination
	// (answered with host unreachable, icmperr.go).
	DropNoRoute
	// DropTooBig: an inner packet larger than the tunnel MTU (an ICMP
	// error went back to its sender when allowed).
	DropTooBig
	// DropHeldOverflow: a packet waiting for a handshake found its peer's
	// queue (MaxHeldPerPeer) or the worker's cap full.
	DropHeldOverflow
	// DropNonceExhausted: the keypair reached [protocol.RejectAfterMessages].
	DropNonceExhausted
	// DropWANMalformed: a WAN frame that is not well-formed UDP to us.
	DropWANMalformed
	// DropNotForUs: a WAN frame to another address or port.
	DropNotForUs
	// DropBadType: a WireGuard message of unknown type or reserved bytes
	// not zero.
	DropBadType
	// DropShortData: transport data shorter than header + tag (32 bytes).
	DropShortData
	// DropUnknownIndex: transport data whose receiver index names no
	// keypair.
	DropUnknownIndex
	// DropExpired: transport data for a keypair past RejectAfterTime or
	// zeroed.
	DropExpired
	// DropCounterLimit: transport data with counter >= [protocol.RejectAfterMessages].
	DropCounterLimit
	// DropAuth: transport data that failed authentication.
	DropAuth
	// DropReplay: an authenticated counter seen before or too old.
	DropReplay
	// DropInnerMalformed: a decrypted packet, or one the host hands to
	// the tunnel (Engine.SendTunnel), whose IP header is not valid (a
	// fragment is valid: it is sealed as a packet of its own).
	DropInnerMalformed
	// DropAllowedIPs: a decrypted packet whose source is not in its
	// peer's allowed IPs.
	DropAllowedIPs
	// DropNoNeighbour: no MAC known yet for the next hop on the LAN.
	DropNoNeighbour
	// DropHandshakeQueueFull: the control plane's handshake queue was full.
	DropHandshakeQueueFull
	// DropMailboxFull: a worker's mailbox was full for a packet of the
	// host's (SendTunnel), a datagram the kernel reassembled
	// (ReceiveWAN) or an owned-mode ARP/NDP frame (SendFrame). A control
	// packet the mailbox refused (Send, SendWait) is its sender's to
	// count (gateway's mailbox_full), not counted here too.
	DropMailboxFull
	// DropRingFull: a TX ring took fewer frames than offered.
	DropRingFull
	// DropNoBuffer: no free frame to build a packet in.
	DropNoBuffer
	// DropClosed: frames held, mail its mailbox took (Send,
	// SendWait, SendTunnel, ReceiveWAN, SendFrame) that no worker
	// handled, and handshake messages it received that the control
	// plane had not taken (Handshakes), when the engine closed; and the
	// packets SendTunnel, ReceiveWAN and SendFrame refused because it
	// was closing (a control packet Send or SendWait refused is its
	// sender's to count, as for DropMailboxFull).
	DropClosed
	// DropHandshakeGaveUp: packets held for a peer whose handshake gave up
	// after RekeyAttemptTime.
	DropHandshakeGaveUp
	// DropHostMulticast: multicast and broadcast the host kernel sends on
	// the exception interface (IPv6 router solicitations, MLD reports, a
	// broadcast to the tunnel's subnet), which no peer's allowed IPs
	// route.
	DropHostMulticast
	// DropWANTooBig: a WireGuard datagram reassembled from IP fragments,
	// by the host kernel (Engine.ReceiveWAN) or the engine
	// (Config.Reassemble), larger than a frame.
	DropWANTooBig
	// DropTTLExceeded: a transit packet (LAN → tunnel or tunnel → LAN)
	// that arrived with TTL or hop limit 0 or 1 and so would leave with 0
	// (RFC 1812 §5.3.1, RFC 8200 §3); answered with time exceeded when
	// ICMP rules and the rate limits allow.
	DropTTLExceeded
	// DropFragmentNoBuffer: an IPv4 packet without DF over the tunnel MTU,
	// or an outer packet over the WAN MTU (wanfrag.go), that could not be
	// fragmented for want of free frames or headroom (fragmentation needs
	// one frame per fragment).
	DropFragmentNoBuffer
	// DropLANTooBig: a decrypted packet larger than the LAN port's MTU
	// (a peer whose tunnel MTU is larger than ours) that could not be
	// fragmented toward the LAN: IPv4 with DF or IPv6 (answered into the
	// tunnel with "fragmentation needed" / "packet too big" carrying the
	// LAN MTU), or no free frames or next hop for the fragments.
	DropLANTooBig
	// DropVLAN: a LAN frame of another VLAN than the LAN's (Config.LANVLAN;
	// with none: a tag with VID other than 0, an 802.1ad or a stacked
	// tag). The XDP program leaves such frames to the kernel: a worker
	// sees them only on a port without one.
	DropVLAN
	// DropWANVLAN: the same on the WAN (Config.WANVLAN): another VLAN's
	// frame is never read as WireGuard.
	DropWANVLAN
	// DropPeerRemoved: packets held for a peer that was removed from the
	// configuration (Peer.Removed), freed at the worker's next turn.
	DropPeerRemoved
	// DropNoWANAddress: a control-plane packet to an address family the
	// WAN interface has no usable address of (Engine.SetWAN).
	DropNoWANAddress
	// DropMartian: a transit packet (LAN → tunnel or tunnel → LAN) with
	// an address no router forwards (header.TransitAddrs): source
	// 0.0.0.0, 127/8, multicast or 255.255.255.255, destination 0.0.0.0
	// or 127/8, or an IPv4 source that is one of the host's own
	// addresses (routeTable.ownSource); IPv6 source ::, ::1, multicast or
	// link-local, destination ::1 or link-local. Linux drops the same as
	// martians (IPv4) or address errors (IPv6), and answers a link-local
	// source with "beyond scope of source address" (scope.go), as the
	// gateway does.
	DropMartian
	// DropMulticast: a transit packet to a multicast address or
	// 255.255.255.255, which Linux, without a multicast routing daemon,
	// never forwards (RFC 1812 §5.3.5.1 for the limited broadcast). From
	// the tunnel, such a packet goes to the exception interface instead
	// when there is one (Config.Exception), as Linux's wg0 delivers it
	// locally; from the LAN, the XDP program leaves it to the kernel, so
	// that a worker sees it only on a port without one.
	DropMulticast
	// DropIPOptions: a transit packet with options Linux does not forward
	// (header.TransitOptions): an IPv4 source route or CIPSO option,
	// IPv4 options that do not parse or whose record route or timestamp
	// pointer or length Linux rejects, a hop-by-hop header Linux rejects
	// (padding beyond 7 bytes or not zero, more than 8 options, a bad
	// router alert or IOAM option, a CALIPSO option), an IPv6 hop-by-hop option
	// whose type says to discard the packet when unknown (RFC 8200 §4.2).
	DropIPOptions
	// DropOffLAN: a decrypted transit packet whose route leads out of
	// another interface than the LAN, or that the LAN resolver has no
	// route for (RouteLengths' offLAN: the WAN's default route toward
	// the Internet, for a full-tunnel road warrior), which
	// only the host's kernel can forward, without an exception interface
	// (Config.Exception) to hand it there (hairpin.go).
	DropOffLAN
	// DropNoEndpoint: a packet for a peer whose endpoint the gateway does
	// not know (configured without one, and not heard from), dropped at
	// once and answered with host unreachable, as Linux's WireGuard
	// (wg_xmit, -EDESTADDRREQ); a peer with an endpoint and no session
	// holds its packets for the handshake instead (held.go).
	DropNoEndpoint
	// DropNoWANRoute: a control-plane packet (handshake message, cookie
	// reply, keepalive) to an endpoint toward which no route leads out of
	// the WAN interface, dropped once it waited for its next hop as long
	// as one that does not answer (DropNoNeighbour) does; only with a WAN
	// resolver that says so (WANRoutes). Linux's WireGuard fails such a
	// send at once, its route lookup finding none; the wait lets a route
	// that comes meanwhile (the WAN's address and default route coming
	// up) still carry it.
	DropNoWANRoute
	// DropIPv6Off: an inner IPv6 packet while the tunnel MTU is below
	// 1280 (Config.MTU below MinMTU6, RFC 8200 §5), where Linux turns
	// IPv6 off on its wg0: it removes wg0's IPv6 addresses and routes
	// and refuses new ones ("No such device"), so it answers a LAN
	// host's IPv6 packet to the peers' prefixes with "no route to
	// destination" (ICMPv6 type 1 code 0, ip6_pkt_drop) and drops the
	// IPv6 packets wg0 receives (ipv6_rcv, Ip6InDiscards). The worker
	// does the same (unreach.go): a LAN host's packet is answered
	// likewise (before its hop limit or size is judged, as Linux's
	// route lookup comes first); a peer's, whatever its source, the
	// host's (Engine.SendTunnel) and ICMPv6 errors for the tunnel are
	// dropped unanswered. Carried, such a tunnel's IPv6 stalls: "packet
	// too big" below 1280 is not taken by hosts (RFC 8201 §4), whose
	// larger packets stay refused after the connection is up.
	DropIPv6Off
	// DropKernelSocketFull: WireGuard datagrams that the host kernel
	// dropped at the socket that hands them to Engine.ReceiveWAN (a
	// gateway's: internal/kernelsock), chiefly for its receive buffer
	// full while its reader lagged (the kernel's UdpRcvbufErrors or
	// Udp6RcvbufErrors): datagrams it reassembled from IP fragments, or
	// with IPv4 options or IPv6 extension headers. No worker counts
	// them: the socket's owner reports its count (CountKernelSocketDrops),
	// which Stats gives as queue 0's, the sockets being no queue's.
	DropKernelSocketFull
	// DropWANMartian: a WAN datagram (or IP fragment) to us from a source
	// that Linux's IP input drops before any socket sees it
	// (header.MartianSource: 0.0.0.0/8, 127.0.0.0/8, multicast,
	// 255.255.255.255, ::1, IPv4-mapped IPv6; and ::): never a peer's,
	// and an answer (a cookie reply, a roamed endpoint) would go nowhere
	// or to a spoofed victim.
	DropWANMartian

	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropMalformed:          "malformed",
	DropNotIP:              "not_ip",
	DropNoRoute:            "no_route",
	DropTooBig:             "too_big",
	DropHeldOverflow:       "held_overflow",
	DropNonceExhausted:     "nonce_exhausted",
	DropWANMalformed:       "wan_malformed",
	DropNotForUs:           "not_for_us",
	DropBadType:            "bad_type",
	DropShortData:          "short_data",
	DropUnknownIndex:       "unknown_index",
	DropExpired:            "expired_keypair",
	DropCounterLimit:       "counter_limit",
	DropAuth:               "authentication",
	DropReplay:             "replay",
	DropInnerMalformed:     "inner_malformed",
	DropAllowedIPs:         "allowed_ips",
	DropNoNeighbour:        "no_neighbour",
	DropHandshakeQueueFull: "handshake_queue_full",
	DropMailboxFull:        "mailbox_full",
	DropRingFull:           "ring_full",
	DropNoBuffer:           "no_buffer",
	DropClosed:             "closed",
	DropHandshakeGaveUp:    "handshake_gave_up",
	DropHostMulticast:      "host_multicast",
	DropWANTooBig:          "wan_too_big",
	DropTTLExceeded:        "ttl_exceeded",
	DropFragmentNoBuffer:   "fragment_no_buffer",
	DropLANTooBig:          "lan_too_big",
	DropVLAN:               "vlan",
	DropWANVLAN:            "wan_vlan",
	DropPeerRemoved:        "peer_removed",
	DropNoEndpoint:         "no_endpoint",
	DropNoWANAddress:       "no_wan_address",
	DropMartian:            "martian",
	DropMulticast:          "multicast",
	DropIPOptions:          "ip_options",
	DropOffLAN:             "off_lan",
	DropNoWANRoute:         "no_wan_route",
	DropIPv6Off:            "ipv6_off",
	DropKernelSocketFull:   "kernel_socket_full",
	DropWANMartian:         "wan_martian",
}

// String is the reason's snake-case name (for metric labels and logs).
func (r DropReason) String() string { return counts.Name(dropNames[:], r) }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// QueueStats are one worker's counters.
type QueueStats struct {
	// Encrypted / Decrypted count transport data packets sealed and
	// accepted; Decrypted includes the keepalives received, Encrypted
	// not the keepalives sent, which the control plane seals and the
	// mailbox sends as control packets (ControlSent; gateway
	// keepaliveLocked); bytes are the inner bytes of the
	// same packets (each packet's IP length; a decrypted packet whose
	// header could not be read, or from a source outside its peer's
	// allowed IPs, as received, with the sender's padding), whatever
	// became of them after (delivered, handed to the host, or dropped
	// under a reason: allowed_ips, ttl_exceeded, no_neighbour, ...).
	Encrypted      uint64 `json:"encrypted"`
	Decrypted      uint64 `json:"decrypted"`
	EncryptedBytes uint64 `json:"encrypted_bytes"`
	DecryptedBytes uint64 `json:"decrypted_bytes"`
	// KeepalivesReceived counts authenticated empty transport messages.
	KeepalivesReceived uint64 `json:"keepalives_received"`
	// HandshakesReceived counts messages of types 1–3 handed on.
	HandshakesReceived uint64 `json:"handshakes_received"`
	// ControlSent counts control-plane packets sent from the mailbox.
	ControlSent uint64 `json:"control_sent"`
	// Exception counts inner packets handed to the exception interface.
	Exception uint64 `json:"exception"`
	// PeerToPeer counts decrypted packets routed back into the tunnel
	// (hairpin.go: to a peer whose allowed IPs hold their destination);
	// each also counts in Decrypted and then, as a LAN packet would, in
	// Encrypted once sealed (each fragment), or under the drop reason of
	// the way out (no_endpoint, held_overflow, ...): a stage, as
	// ToHost is, not a count of packets sent.
	PeerToPeer uint64 `json:"peer_to_peer"`
	// ToHost counts decrypted transit packets handed to the exception
	// interface for the host's kernel to forward (hairpin.go: their route
	// leads out of another interface than the LAN); each also counts in
	// Decrypted, not in Exception (the host's own packets).
	ToHost uint64 `json:"to_host"`
	// ICMPSent counts ICMP errors sent (time exceeded, fragmentation
	// needed / packet too big, host / address unreachable, beyond scope
	// of source address, parameter problem; icmperr.go): to LAN hosts,
	// those the LAN port took (one its full ring refused counts in
	// ring_full instead), into the tunnel, those handed to the path of
	// the host's packets (which counts what it then drops or holds, as
	// for them), and to the host.
	ICMPSent uint64 `json:"icmp_sent"`
	// ICMPSuppressed counts time exceeded, host unreachable, beyond
	// scope and parameter problem errors not sent because of the rate
	// limits
	// (Config.ICMPRate, ICMPBurst, ICMPDestInterval), which all workers
	// share.
	ICMPSuppressed uint64 `json:"icmp_suppressed"`
	// Fragmented counts IPv4 packets without DF over the tunnel MTU sent
	// as fragments; Fragments the fragments sent for them (each sealed
	// as a transport message of its own).
	Fragmented uint64 `json:"fragmented"`
	Fragments  uint64 `json:"fragments"`
	// OuterFragmented counts outer packets (transport, handshake and
	// cookie messages) over the WAN MTU (Engine.SetWANMTU) sent as IP
	// fragments, as Linux's kernel fragments what its WireGuard sends;
	// OuterFragments the fragments sent for them (wanfrag.go).
	OuterFragmented uint64 `json:"outer_fragmented"`
	OuterFragments  uint64 `json:"outer_fragments"`
	// NeighbourFrames counts ARP/NDP frames handed to a NeighbourHandler.
	NeighbourFrames uint64 `json:"neighbour_frames"`
	// FromKernel counts WireGuard datagrams that reached the WAN outside
	// the ports and came through Engine.ReceiveWAN (reassembled from IP
	// fragments by the host kernel, or carrying IPv4 options or IPv6
	// extension headers).
	FromKernel uint64 `json:"from_kernel"`
	// ReplayWidened counts keypairs whose replay window this worker
	// widened (Config.ReplayWindow replay.Auto: a second queue, or deep
	// reordering), or made wide from the start (the peer's session before
	// it needed the width: replay.Window.Needed, Keypair.newWindow).
	ReplayWidened uint64 `json:"replay_widened"`
	// Held is the number of packets held now for a handshake or a
	// neighbour.
	Held uint64 `json:"held"`
	// Drops counts drops by reason.
	Drops DropCounts `json:"drops"`
	// LAN and WAN are the ports' queue counters.
	LAN dataplane.Stats `json:"lan"`
	WAN dataplane.Stats `json:"wan"`
}

// DropCounts counts drops by reason, indexed by DropReason. In JSON it is
// an object of the nonzero counts by reason name ({"replay": 3}), which
// UnmarshalJSON reads back; an unknown name is an error. Its methods (those
// of internal/counts.Counts, which go doc does not list): List gives the
// nonzero counts as sorted "reason=count" strings (print that: %v prints
// the whole array), Total their sum, Add adds another's.
type DropCounts = counts.Counts[DropReason]

type counters struct {
	encrypted, decrypted           atomic.Uint64
	encryptedBytes, decryptedBytes atomic.Uint64
	keepalives, handshakes         atomic.Uint64
	controlSent, exception, icmp   atomic.Uint64
	held, neighbour, fromKernel    atomic.Uint64
	icmpSuppressed                 atomic.Uint64
	fragmented, fragments          atomic.Uint64
	outerFragmented, outerFrags    atomic.Uint64
	replayWidened, peerToPeer      atomic.Uint64
	toHost                         atomic.Uint64
	drops                          counts.Atomic[DropReason]
}

// count adds n drops for reason r. Worker-owned counters are atomics so
// that Stats may read them; workers add once per batch per reason.
func (w *worker) count(r DropReason, n int) {
	w.c.drops.Add(r, uint64(n))
}

func (w *worker) stats() QueueStats {
	var s QueueStats
	s.Encrypted = w.c.encrypted.Load()
	s.Decrypted = w.c.decrypted.Load()
	s.EncryptedBytes = w.c.encryptedBytes.Load()
	s.DecryptedBytes = w.c.decryptedBytes.Load()
	s.KeepalivesReceived = w.c.keepalives.Load()
	s.HandshakesReceived = w.c.handshakes.Load()
	s.ControlSent = w.c.controlSent.Load()
	s.Exception = w.c.exception.Load()
	s.PeerToPeer = w.c.peerToPeer.Load()
	s.ToHost = w.c.toHost.Load()
	s.ICMPSent = w.c.icmp.Load()
	s.ICMPSuppressed = w.c.icmpSuppressed.Load()
	s.Fragmented = w.c.fragmented.Load()
	s.Fragments = w.c.fragments.Load()
	s.OuterFragmented = w.c.outerFragmented.Load()
	s.OuterFragments = w.c.outerFrags.Load()
	s.Held = w.c.held.Load()
	s.NeighbourFrames = w.c.neighbour.Load()
	s.FromKernel = w.c.fromKernel.Load()
	s.ReplayWidened = w.c.replayWidened.Load()
	s.Drops = w.c.drops.Load()
	s.LAN = w.lanQ.Stats()
	s.WAN = w.wanQ.Stats()
	return s
}

// Stats returns each worker's counters; queue 0's DropKernelSocketFull
// is the count of CountKernelSocketDrops.
func (e *Engine) Stats() []QueueStats {
	out := make([]QueueStats, len(e.workers))
	for i, w := range e.workers {
		out[i] = w.stats()
	}
	if f := e.kernelDrops.Load(); f != nil && len(out) > 0 {
		out[0].Drops[DropKernelSocketFull] += (*f)()
	}
	return out
}

// CountKernelSocketDrops makes drops the count of DropKernelSocketFull:
// the datagrams the host kernel dropped since the start at the sockets
// that feed Engine.ReceiveWAN (kernelsock.Set.Drops), cumulative, read
// at each Stats, after Close too (the sockets' last count). drops must be
// safe for concurrent use and quick (it runs in Stats, never per
// packet); nil counts none. Safe for concurrent use.
func (e *Engine) CountKernelSocketDrops(drops func() uint64) {
	if drops == nil {
		e.kernelDrops.Store(nil)
		return
	}
	e.kernelDrops.Store(&drops)
}

// TotalDrops adds up the drops of every worker by reason.
func TotalDrops(qs []QueueStats) DropCounts {
	var t DropCounts
	for i := range qs {
		t.Add(&qs[i].Drops)
	}
	return t
}
