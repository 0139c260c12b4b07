// Package fastpath is wgpio's WireGuard data plane: one worker per NIC
// queue that receives a burst, encrypts or decrypts it in place and
// transmits it, on one OS thread, with no hand-off between goroutines
// (ARCHITECTURE.md "Fast path"; the transport data message of the WireGuard
// whitepaper §5.4.6).
//
// Outbound (LAN RX → WAN TX), per burst: parse (package header), look up
// the destination in the allowed-IPs snapshot (an immutable
// github.com/gaissmai/bart table swapped atomically by UpdatePeers), group by
// peer, reserve one range of send counters per peer with one atomic add
// (cut at protocol.RejectAfterMessages), pad to 16 bytes without passing the MTU,
// seal in place (ChaCha20-Poly1305, nonce = 32 zero bits ‖ 64-bit
// little-endian counter), stamp the outer Ethernet/IP/UDP headers (for
// most peers from the worker's one shared source and 12 bytes of the
// peer's, its next hop's MAC and its endpoint's address and port; a peer
// reached otherwise, over IPv6, from a further WAN address, tagged or
// with the UDP checksum, from a whole template of its own: outersrc.go)
// with a source port chosen by hashing the inner 5-tuple into the peer's
// port range, transmit. Packets larger than the
// tunnel MTU get ICMP "fragmentation needed" / "packet too big", or are
// fragmented (IPv4 without DF, RFC 791); transit packets lose one TTL or hop
// limit and are answered with time exceeded at 0 (router.go); packets for
// a peer without a usable keypair are held (MaxHeldPerPeer per peer on each worker, a cap
// per worker) while the control plane handshakes.
//
// Inbound (WAN RX → LAN TX), per burst: types 1–3 are copied to the control
// plane (Engine.Handshakes, bounded); type 4 is looked up by receiver index
// in a lock-free table, opened in place, checked against the keypair's
// replay window (8,128 counters, widened to 131,008 when the session needs
// it: Config.ReplayWindow) once per keypair per burst — after
// authentication (package replay) —, checked against the peer's allowed IPs,
// trimmed to the inner IP length, and sent toward the LAN next hop. The
// first worker to authenticate a packet with a peer's "next" keypair
// promotes it. Packets for the gateway's own tunnel addresses go to
// Config.Exception (the host kernel, through a TUN). A packet whose
// destination lies in a peer's allowed IPs, unless the LAN has a longer
// route toward it (RouteLengths), goes back into the tunnel to that peer
// (cryptokey routing, whitepaper §2; hairpin.go), through outbound's code
// as a second burst. One whose LAN route leads out of another interface
// (a full tunnel's Internet traffic, RouteLengths) goes to
// Config.Exception for the host's kernel to forward, its TTL as it came
// out of the tunnel (the kernel lowers it), or is dropped (off_lan)
// without one.
//
// VLANs (vlan.go): each port is on one 802.1Q VLAN (Config.LANVLAN,
// Config.WANVLAN; 0 untagged, a priority tag counting as untagged). A frame
// of another VLAN is dropped by reason (vlan, wan_vlan), never encrypted
// nor read as WireGuard, and whatever a worker sends on a port carries its
// tag. The check is one comparison of the parsed VID per frame.
//
// Shared state and who writes it: the control plane (package gateway)
// creates Peers and Keypairs, publishes keypairs in the IndexTable and the
// peers' atomic slots, and sets endpoints; workers read them without locks.
// Workers keep timer stamps and counters per peer privately and publish
// them at most every PublishInterval (50 ms). Per packet, nothing shared is
// written but the send-counter add (once per peer per burst) and the replay
// window (one lock per keypair per burst); the AEAD seals or opens a whole
// burst in one call (chachapoly.Seal, chachapoly.Open), with no interface
// call per packet. Every dropped packet is counted by reason (DropReason)
// per worker.
package fastpath
