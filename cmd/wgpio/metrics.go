//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/acceptloop"
	"github.com/wgpio/wgpio/internal/reassembly"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"
)

// fillRingEmptyKey is AF_XDP's Backend counter of fill-ring-empty events
// (dataplane.LossCounters says why it is not a loss counter).
const fillRingEmptyKey = "xsk_rx_fill_ring_empty_descs"

// collector exports a gateway's counters in Prometheus' conventions: one
// metric per quantity, labels for queue, reason and peer, _total counters.
// The per-peer metrics (label public_key) are exported only while the
// gateway has at most maxPeers peers ([WGPIO] MetricsPeers): a series per
// peer and metric is one more for Prometheus to keep, and at 100,000 peers
// a scrape of their 300,000 cost 1.3-2.4 s of CPU and 250-300 MB of garbage
// (BenchmarkScrape100k). wgpio_peers counts them whatever their number.
type collector struct {
	name     string
	stats    func() GatewayStats              // without Peers (compat modes: with MetricsPeers of them, and PeersConfigured)
	peers    func(max int) ([]PeerStat, bool) // the peers if at most max (boundedPeerStats), called only within maxPeers
	maxPeers int                              // 0: no per-peer metrics

	encrypted, decrypted, drops, held                                                          *prometheus.Desc
	encBytes, decBytes, handshakes, ctlSent                                                    *prometheus.Desc
	fromKernel, replayWidened                                                                  *prometheus.Desc
	icmpSent, icmpSuppressed, fragmented                                                       *prometheus.Desc
	peerToPeer, toHost, outerFragmented                                                        *prometheus.Desc
	outerFragments, fragments, forHost                                                         *prometheus.Desc
	peerRx, peerTx, peerHandshake                                                              *prometheus.Desc
	portRx, portTx, portDrops, portCopies                                                      *prometheus.Desc
	kernelDrops, fillRingEmpty                                                                 *prometheus.Desc
	xdp                                                                                        *prometheus.Desc
	liveSessions, keypairs, unconfirmed                                                        *prometheus.Desc
	hsSent, keepalivesSent, keepalivesIn                                                       *prometheus.Desc
	peerCount                                                                                  *prometheus.Desc
	hsBacklog, hsBacklogPeak, uapiRefused, logLinesLost                                        *prometheus.Desc
	controlDrops, hsInvalid, exceptionDrops                                                    *prometheus.Desc
	tunRx, tunTx, tunDrops                                                                     *prometheus.Desc
	tunICMPSent, tunICMPSuppressed                                                             *prometheus.Desc
	tunICMPSendErrors                                                                          *prometheus.Desc
	compatRx, compatTx, compatDrops                                                            *prometheus.Desc
	compatICMPSent, compatICMPSuppressed                                                       *prometheus.Desc
	compatFragmented, compatPeerToPeer                                                         *prometheus.Desc
	compatWANFragmented, compatWANFragments                                                    *prometheus.Desc
	compatWANFromKernel                                                                        *prometheus.Desc
	udpRx, udpTx, udpDrops                                                                     *prometheus.Desc
	reasmFragments, reasmDatagrams                                                             *prometheus.Desc
	reasmInProgress, reasmBytes, reasmDrops                                                    *prometheus.Desc
	nbrReplies, nbrDrops, nbrRequests, nbrFailed, nbrFull, nbrEvicted, nbrConflicts, nbrClaims *prometheus.Desc
}

// newCollector returns the collector of a gateway: stats gives its
// counters, peers its peers' when there are at most max, else false
// (asked with max = maxPeers, config.WGPIO.MetricsPeers, only when the
// counters count at most that many; 0 or less: never).
func newCollector(name string, maxPeers int, stats func() GatewayStats, peers func(max int) ([]PeerStat, bool)) *collector {
	l := prometheus.Labels{"device": name}
	d := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("wgpio_"+n, help, labels, l)
	}
	return &collector{
		name: name, stats: stats, peers: peers, maxPeers: maxPeers,
		peerCount:            d("peers", "Peers configured. The per-peer metrics (wgpio_peer_*) are exported only while there are at most [WGPIO] MetricsPeers (default 1000)."),
		encrypted:            d("packets_encrypted_total", "Transport data packets sealed by the fast path.", "queue"),
		decrypted:            d("packets_decrypted_total", "Transport data packets authenticated and accepted.", "queue"),
		encBytes:             d("inner_bytes_encrypted_total", "Inner bytes sealed.", "queue"),
		decBytes:             d("inner_bytes_decrypted_total", "Inner bytes of the packets counted in packets_decrypted_total (accepted, whatever became of them after).", "queue"),
		drops:                d("drops_total", "Packets dropped by the fast path, by reason.", "queue", "reason"),
		held:                 d("packets_held", "Packets held now: waiting for a handshake, or for a neighbour (a peer endpoint's next hop, a LAN host).", "queue"),
		handshakes:           d("handshake_messages_received_total", "Handshake messages handed to the control plane.", "queue"),
		keepalivesIn:         d("keepalives_received_total", "Keepalives (empty transport data messages) authenticated and accepted.", "queue"),
		hsSent:               d("handshake_messages_sent_total", "Handshake messages the control plane sent, by type (initiation: first attempts, retries every Rekey-Timeout and rekeys; response; cookie_reply: under load). Initiations growing with no keypairs_installed_total beside them are handshakes no peer answers.", "type"),
		keepalivesSent:       d("keepalives_sent_total", "Keepalives the control plane sent (passive and persistent keepalives, and the initiator's confirmation of a session when it has no data waiting)."),
		ctlSent:              d("control_packets_sent_total", "Control-plane packets sent.", "queue"),
		fromKernel:           d("wan_datagrams_from_kernel_total", "WireGuard datagrams that reached the WAN port through the host kernel (reassembled from IP fragments).", "queue"),
		replayWidened:        d("replay_windows_widened_total", "Sessions whose replay window widened from 8,128 to 131,008 counters (ReplayWindow = auto: received on a second queue, or reordered deeply), or started wide (the peer's session before it accepted a packet more than 8,128 counters late).", "queue"),
		icmpSent:             d("icmp_errors_sent_total", "ICMP errors sent: time exceeded, fragmentation needed, packet too big, host unreachable, parameter problem.", "queue"),
		icmpSuppressed:       d("icmp_errors_suppressed_total", "ICMP errors not sent because of the ICMP rate limits, which hold every kind but fragmentation needed / packet too big (time exceeded, host unreachable, parameter problem; ICMPv6 beyond scope and no route) (ICMPRate, ICMPBurst, ICMPDestInterval).", "queue"),
		fragmented:           d("packets_fragmented_total", "IPv4 packets without DF over the tunnel MTU sent as fragments.", "queue"),
		outerFragmented:      d("outer_packets_fragmented_total", "Outer packets over the WAN MTU sent as IP fragments, as Linux's kernel fragments what its WireGuard sends.", "queue"),
		outerFragments:       d("outer_fragments_total", "IP fragments sent for the outer packets over the WAN MTU (outer_packets_fragmented_total).", "queue"),
		peerToPeer:           d("packets_peer_to_peer_total", "Decrypted packets routed back into the tunnel, to the peer whose allowed IPs hold their destination (hub and spoke); those the way out then drops (no_endpoint, held_overflow, ...) count in wgpio_drops_total too.", "queue"),
		forHost:              d("packets_for_host_total", "Decrypted packets to the host's own addresses (its tunnel, LAN or WAN addresses: SSH or monitoring of the gateway through the tunnel), handed to its kernel through the exception TUN; packets_to_host_total counts those it forwards.", "queue"),
		fragments:            d("fragments_total", "IP fragments sent for the packets counted in packets_fragmented_total, each sealed as a transport message of its own.", "queue"),
		toHost:               d("packets_to_host_total", "Decrypted packets whose route leads out of another interface than the LAN (a full tunnel's Internet traffic), handed to the host's kernel through the exception TUN to forward.", "queue"),
		peerRx:               d("peer_receive_bytes_total", "WireGuard bytes received from a peer (UDP payloads: transport data, keepalives and handshake messages), as wg show's transfer counts them.", "public_key"),
		peerTx:               d("peer_transmit_bytes_total", "WireGuard bytes sent to a peer (UDP payloads: transport data, keepalives and handshake messages), as wg show's transfer counts them.", "public_key"),
		peerHandshake:        d("peer_last_handshake_seconds", "Unix time of a peer's last handshake (0: none).", "public_key"),
		portRx:               d("port_receive_packets_total", "Frames received on a port queue.", "port", "queue"),
		portTx:               d("port_transmit_packets_total", "Frames transmitted on a port queue.", "port", "queue"),
		portDrops:            d("port_drops_total", "Frames dropped by the dataplane backend.", "port", "queue", "reason"),
		portCopies:           d("port_copies_total", "Frames copied between pools on transmit.", "port", "queue"),
		kernelDrops:          d("port_kernel_drops_total", "Frames the kernel dropped at a port queue's AF_XDP socket before the workers (compat mode: the bind and tundev) saw them, by reason (XDP_STATISTICS: rx_ring_full, the workers did not keep up; rx_dropped, no free frame in the fill ring or a frame too long for one; rx_invalid_descs, tx_invalid_descs).", "port", "queue", "reason"),
		fillRingEmpty:        d("port_fill_ring_empty_total", "Times the kernel found a port queue's fill ring empty (XDP_STATISTICS rx_fill_ring_empty_descs; in copy mode each such frame is also in port_kernel_drops_total{reason=\"rx_dropped\"}).", "port", "queue"),
		xdp:                  d("xdp_frames_total", "Frames the port's XDP program judged, by verdict (redirect_*: to the workers; pass*: to the kernel, pass_vlan: of another VLAN; drop_vlan: behind more VID-0 tags than the program takes off).", "port", "verdict"),
		liveSessions:         d("live_sessions", "Peers with a confirmed session younger than Reject-After-Time."),
		keypairs:             d("keypairs_installed_total", "Keypairs installed by completed handshakes, confirmed or not."),
		unconfirmed:          d("responder_keypairs_expired_unconfirmed_total", "Responder keypairs freed without receiving data (a preshared key mismatch shows here)."),
		hsBacklog:            d("handshake_backlog", "Received handshake messages waiting for the handshake pool (under load from an eighth of its queue)."),
		hsBacklogPeak:        d("handshake_backlog_peak", "The largest handshake backlog seen."),
		logLinesLost:         d("log_lines_lost_total", "Log lines the gateway could not write to its standard error (its reader gone: a broken pipe; or a write error), each line lost whole."),
		uapiRefused:          d("uapi_connections_refused_total", "Connections to the UAPI socket (wg show, wg set) refused, closed unserved and unapplied (answered EAGAIN first unless 64 refusals were being answered already): over 64 served at once, they waited 15 s for a place, or found 64 others waiting already (a client holding connections open, or opening them without end)."),
		controlDrops:         d("control_drops_total", "Handshake messages the control plane dropped or could not send, by reason (mailbox_full: a worker's mailbox refused the message, counted here alone; that queue's wgpio_drops_total{reason=\"mailbox_full\"} counts the other packets its mailbox refused).", "reason"),
		hsInvalid:            d("handshake_invalid_total", "Handshake messages and cookie replies refused by the protocol's checks, by reason (bad_mac1: a handshake not made for this gateway's public key; stale_timestamp: a replayed initiation; wrong_size, ...); they add up to wgpio_control_drops_total{reason=\"handshake_invalid\"}.", "reason"),
		exceptionDrops:       d("exception_tun_drops_total", "Packets for the host (its tunnel, LAN or WAN addresses, or for its kernel to forward) that the exception TUN refused (its interface down, its queue full), by reason in wgpio_tun_drops_total."),
		tunRx:                d("tun_receive_packets_total", "Packets read from the kernel TUN: the exception TUN's (the host's own packets into the tunnel), or compat-mqtun's (the LAN's)."),
		tunTx:                d("tun_transmit_packets_total", "Packets written to the kernel TUN: the exception TUN's (for the host), or compat-mqtun's (decrypted)."),
		tunDrops:             d("tun_drops_total", "Packets the kernel TUN's reader or writer dropped, by reason (writing into the kernel: full, the kernel had no room for the packet, EAGAIN or ENOBUFS; down, the interface was down or gone; malformed, neither IPv4 nor IPv6; write_error, any other errno; reading from the kernel: kernel_queue_full, packets the kernel dropped at the TUN's queue because the reader fell behind (its TX drops); too_big, larger than the reader's buffer; no_route: compat-mqtun, to no allowed IP; host_multicast: the host's own multicast, to no allowed IP; closed, read from the kernel and not yet taken when it stopped).", "reason"),
		tunICMPSent:          d("tun_icmp_errors_sent_total", "Mode = compat-mqtun: host unreachable errors sent (through raw sockets) for the packets dropped as no_route, as Linux's wg0 answers a packet to no peer's allowed IPs."),
		tunICMPSuppressed:    d("tun_icmp_errors_suppressed_total", "Mode = compat-mqtun: host unreachable errors not sent because of the ICMP rate limits (ICMPRate, ICMPBurst, ICMPDestInterval)."),
		tunICMPSendErrors:    d("tun_icmp_send_errors_total", "Mode = compat-mqtun: host unreachable errors the kernel refused to send (sendto failed)."),
		compatRx:             d("compat_receive_packets_total", "Mode = compat: packets handed to wireguard-go by wgpio's bind (side wan) and tundev (side lan).", "side"),
		compatTx:             d("compat_transmit_packets_total", "Mode = compat: packets wgpio's bind (side wan) and tundev (side lan) transmitted for wireguard-go.", "side"),
		compatDrops:          d("compat_drops_total", "Mode = compat: frames and packets wgpio's bind (side wan) and tundev (side lan) dropped, by reason.", "side", "reason"),
		compatICMPSent:       d("compat_icmp_errors_sent_total", "Mode = compat: ICMP errors the LAN device (tundev) sent, toward the LAN and into the tunnel: fragmentation needed, packet too big, time exceeded, host unreachable, parameter problem."),
		compatICMPSuppressed: d("compat_icmp_errors_suppressed_total", "Mode = compat: ICMP errors not sent because of the ICMP rate limits, which hold every kind but fragmentation needed / packet too big (time exceeded, host unreachable, parameter problem; ICMPv6 beyond scope and no route) (ICMPRate, ICMPBurst, ICMPDestInterval)."),
		compatFragmented:     d("compat_packets_fragmented_total", "Mode = compat: decrypted IPv4 packets without DF over the LAN MTU sent as fragments."),
		compatPeerToPeer:     d("compat_packets_peer_to_peer_total", "Mode = compat: decrypted packets handed back to wireguard-go for the peer whose allowed IPs hold their destination (hub and spoke)."),
		compatWANFragmented:  d("compat_wan_datagrams_fragmented_total", "Mode = compat: outer UDP datagrams longer than the WAN's MTU that wgpio's bind sent as IP fragments (IPv4 fragments, IPv6 ones with a Fragment header), as Linux fragments its WireGuard's; those also count in wgpio_compat_transmit_packets_total{side=\"wan\"}."),
		compatWANFragments:   d("compat_wan_fragments_total", "Mode = compat: IP fragment frames wgpio's bind transmitted for the outer datagrams longer than the WAN's MTU."),
		compatWANFromKernel:  d("compat_wan_datagrams_from_kernel_total", "Mode = compat: WireGuard datagrams that reached the WAN outside the AF_XDP port, through the host kernel's socket on the listen port (reassembled from IP fragments), and that wgpio's bind handed to wireguard-go; those also count in wgpio_compat_receive_packets_total{side=\"wan\"}."),
		udpRx:                d("udp_receive_packets_total", "Mode = compat-mqtun: datagrams the kernel's UDP sockets handed to wireguard-go."),
		udpTx:                d("udp_transmit_packets_total", "Mode = compat-mqtun: datagrams wireguard-go sent through the kernel's UDP sockets."),
		udpDrops:             d("udp_drops_total", "Mode = compat-mqtun: datagrams whose send failed, by reason (no_route, refused: a netfilter rule, too_big, full, send_error).", "reason"),
		reasmFragments:       d("reassembly_fragments_total", "Owned address mode: IP fragments of WireGuard datagrams to the WAN address that the fast path took to reassemble (the kernel, without the address, reassembles none)."),
		reasmDatagrams:       d("reassembly_datagrams_total", "Owned address mode: WireGuard datagrams the fast path reassembled from IP fragments."),
		reasmInProgress:      d("reassembly_datagrams_in_progress", "Owned address mode: datagrams being reassembled (at most 256)."),
		reasmBytes:           d("reassembly_bytes_held", "Owned address mode: bytes held for the datagrams being reassembled, in 2 KiB pages (at most 4 MiB)."),
		nbrReplies:           d("neighbour_replies_total", "Owned address mode: ARP replies and neighbour advertisements sent for the gateway's address on a port.", "port"),
		nbrDrops:             d("neighbour_drops_total", "Owned address mode: ARP and NDP frames the gateway took and neither answered nor learnt from, by reason (truncated, hardware, op, not-for-us, not-our-address, source-mac, ...).", "port", "reason"),
		nbrRequests:          d("neighbour_requests_total", "Owned address mode: ARP requests and neighbour solicitations the gateway sent to resolve next hops.", "port"),
		nbrFailed:            d("neighbour_failed_total", "Owned address mode: neighbours that did not answer the gateway's requests.", "port"),
		nbrFull:              d("neighbour_table_full_total", "Owned address mode: neighbour entries refused because the table was at its bound (4,096; learnt neighbours fill three quarters of it at most).", "port"),
		nbrEvicted:           d("neighbour_table_evicted_total", "Owned address mode: unused stale or failed neighbour entries deleted to make room.", "port"),
		nbrConflicts:         d("neighbour_address_conflicts", "Owned address mode: hosts (address and MAC) seen claiming the gateway's own address on a port (at most 64 kept).", "port"),
		nbrClaims:            d("neighbour_address_claims_total", "Owned address mode: ARP and NDP frames from another MAC claiming the gateway's own address on a port.", "port"),
		reasmDrops:           d("reassembly_drops_total", "Owned address mode: IP fragments the reassembly dropped, by reason (timeout, overlap, duplicate, too_big, table_full, memory_full, bad_header, tiny_first, inconsistent, too_many_holes; udp_malformed, udp_checksum, not_for_us for a reassembled datagram refused).", "reason"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.encrypted, c.decrypted, c.encBytes, c.decBytes, c.drops, c.held,
		c.handshakes, c.ctlSent, c.fromKernel, c.replayWidened, c.icmpSent, c.icmpSuppressed, c.fragmented, c.outerFragmented, c.outerFragments, c.fragments, c.peerToPeer, c.toHost, c.forHost, c.peerRx, c.peerTx, c.peerHandshake,
		c.portRx, c.portTx, c.portDrops, c.portCopies, c.kernelDrops, c.fillRingEmpty, c.xdp, c.liveSessions, c.keypairs, c.unconfirmed, c.hsSent, c.keepalivesSent, c.keepalivesIn, c.controlDrops, c.hsInvalid, c.exceptionDrops, c.hsBacklog, c.hsBacklogPeak, c.uapiRefused, c.logLinesLost, c.peerCount,
		c.tunRx, c.tunTx, c.tunDrops, c.tunICMPSent, c.tunICMPSuppressed, c.tunICMPSendErrors,
		c.compatRx, c.compatTx, c.compatDrops, c.compatICMPSent, c.compatICMPSuppressed, c.compatFragmented, c.compatPeerToPeer,
		c.compatWANFragmented, c.compatWANFragments, c.compatWANFromKernel,
		c.udpRx, c.udpTx, c.udpDrops, c.reasmFragments, c.reasmDatagrams, c.reasmInProgress, c.reasmBytes, c.reasmDrops,
		c.nbrReplies, c.nbrDrops, c.nbrRequests, c.nbrFailed, c.nbrFull, c.nbrEvicted, c.nbrConflicts, c.nbrClaims} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ctr := prometheus.CounterValue
	for i, q := range s.Queues {
		qs := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(c.encrypted, ctr, float64(q.Encrypted), qs)
		ch <- prometheus.MustNewConstMetric(c.decrypted, ctr, float64(q.Decrypted), qs)
		ch <- prometheus.MustNewConstMetric(c.encBytes, ctr, float64(q.EncryptedBytes), qs)
		ch <- prometheus.MustNewConstMetric(c.decBytes, ctr, float64(q.DecryptedBytes), qs)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(q.Held), qs)
		ch <- prometheus.MustNewConstMetric(c.handshakes, ctr, float64(q.HandshakesReceived), qs)
		ch <- prometheus.MustNewConstMetric(c.keepalivesIn, ctr, float64(q.KeepalivesReceived), qs)
		ch <- prometheus.MustNewConstMetric(c.ctlSent, ctr, float64(q.ControlSent), qs)
		ch <- prometheus.MustNewConstMetric(c.fromKernel, ctr, float64(q.FromKernel), qs)
		ch <- prometheus.MustNewConstMetric(c.replayWidened, ctr, float64(q.ReplayWidened), qs)
		ch <- prometheus.MustNewConstMetric(c.icmpSent, ctr, float64(q.ICMPSent), qs)
		ch <- prometheus.MustNewConstMetric(c.icmpSuppressed, ctr, float64(q.ICMPSuppressed), qs)
		ch <- prometheus.MustNewConstMetric(c.fragmented, ctr, float64(q.Fragmented), qs)
		ch <- prometheus.MustNewConstMetric(c.outerFragmented, ctr, float64(q.OuterFragmented), qs)
		ch <- prometheus.MustNewConstMetric(c.outerFragments, ctr, float64(q.OuterFragments), qs)
		ch <- prometheus.MustNewConstMetric(c.peerToPeer, ctr, float64(q.PeerToPeer), qs)
		ch <- prometheus.MustNewConstMetric(c.toHost, ctr, float64(q.ToHost), qs)
		ch <- prometheus.MustNewConstMetric(c.forHost, ctr, float64(q.Exception), qs)
		ch <- prometheus.MustNewConstMetric(c.fragments, ctr, float64(q.Fragments), qs)
		for r := range fastpath.NumDropReasons {
			ch <- prometheus.MustNewConstMetric(c.drops, ctr, float64(q.Drops[r]), qs, r.String())
		}
		for _, port := range []struct {
			name string
			st   dataplane.Stats
		}{{"lan", q.LAN}, {"wan", q.WAN}} {
			ch <- prometheus.MustNewConstMetric(c.portRx, ctr, float64(port.st.RXPackets), port.name, qs)
			ch <- prometheus.MustNewConstMetric(c.portTx, ctr, float64(port.st.TXPackets), port.name, qs)
			ch <- prometheus.MustNewConstMetric(c.portCopies, ctr, float64(port.st.Copies), port.name, qs)
			for r := range dataplane.NumDropReasons {
				ch <- prometheus.MustNewConstMetric(c.portDrops, ctr, float64(port.st.Drops[r]), port.name, qs, r.String())
			}
			c.collectKernel(ch, port.name, qs, port.st)
		}
	}
	if r := s.Reassembly; r != nil {
		ch <- prometheus.MustNewConstMetric(c.reasmFragments, ctr, float64(r.Fragments))
		ch <- prometheus.MustNewConstMetric(c.reasmDatagrams, ctr, float64(r.Reassembled))
		ch <- prometheus.MustNewConstMetric(c.reasmInProgress, prometheus.GaugeValue, float64(r.InProgress))
		ch <- prometheus.MustNewConstMetric(c.reasmBytes, prometheus.GaugeValue, float64(r.BytesHeld))
		for why := range reassembly.NumDropReasons {
			ch <- prometheus.MustNewConstMetric(c.reasmDrops, ctr, float64(r.Drops[why]), why.String())
		}
	}
	for port, n := range s.Neighbours {
		ch <- prometheus.MustNewConstMetric(c.nbrReplies, ctr, float64(n.Replies), port)
		for why, v := range n.Drops {
			ch <- prometheus.MustNewConstMetric(c.nbrDrops, ctr, float64(v), port, why)
		}
		ch <- prometheus.MustNewConstMetric(c.nbrRequests, ctr, float64(n.Requests), port)
		ch <- prometheus.MustNewConstMetric(c.nbrFailed, ctr, float64(n.Failed), port)
		ch <- prometheus.MustNewConstMetric(c.nbrFull, ctr, float64(n.Full), port)
		ch <- prometheus.MustNewConstMetric(c.nbrEvicted, ctr, float64(n.Evicted), port)
		ch <- prometheus.MustNewConstMetric(c.nbrConflicts, prometheus.GaugeValue, float64(n.Conflicts), port)
		ch <- prometheus.MustNewConstMetric(c.nbrClaims, ctr, float64(n.Claims), port)
	}
	for port, m := range s.XDP {
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(c.xdp, ctr, float64(v), port, strings.TrimPrefix(k, "xdp_"))
		}
	}
	// The fast path fills Device (statsOf); compat modes have none.
	if d := s.Device; d != nil {
		ch <- prometheus.MustNewConstMetric(c.liveSessions, prometheus.GaugeValue, float64(d.LiveSessions))
		ch <- prometheus.MustNewConstMetric(c.keypairs, ctr, float64(d.KeypairsInstalledTotal))
		ch <- prometheus.MustNewConstMetric(c.unconfirmed, ctr, float64(d.ResponderUnconfirmedTotal))
		ch <- prometheus.MustNewConstMetric(c.hsSent, ctr, float64(d.InitiationsSent), "initiation")
		ch <- prometheus.MustNewConstMetric(c.hsSent, ctr, float64(d.ResponsesSent), "response")
		ch <- prometheus.MustNewConstMetric(c.hsSent, ctr, float64(d.CookieRepliesSent), "cookie_reply")
		ch <- prometheus.MustNewConstMetric(c.keepalivesSent, ctr, float64(d.KeepalivesSent))
		ch <- prometheus.MustNewConstMetric(c.hsBacklog, prometheus.GaugeValue, float64(d.HandshakeBacklog))
		ch <- prometheus.MustNewConstMetric(c.hsBacklogPeak, prometheus.GaugeValue, float64(d.HandshakeBacklogPeak))
		for r := range gateway.NumDropReasons {
			ch <- prometheus.MustNewConstMetric(c.controlDrops, ctr, float64(d.Drops[r]), r.Key())
		}
		// Only the reasons of handshake_invalid (not cookie_required,
		// unknown_peer, nor the zero reason), so that they add up to it.
		invalid := d.InvalidReasons()
		for r := noise.DropReason(1); r < noise.NumDropReasons; r++ {
			if r != noise.DropCookieRequired && r != noise.DropUnknownPeer {
				ch <- prometheus.MustNewConstMetric(c.hsInvalid, ctr, float64(invalid[r]), r.Key())
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.uapiRefused, ctr, float64(s.UAPIRefused))
	ch <- prometheus.MustNewConstMetric(c.logLinesLost, ctr, float64(s.LogLinesLost))
	if e := s.ExceptionDrops; e != nil {
		ch <- prometheus.MustNewConstMetric(c.exceptionDrops, ctr, float64(*e))
	}
	if t := s.TUN; t != nil {
		ch <- prometheus.MustNewConstMetric(c.tunRx, ctr, float64(t.RXPackets))
		ch <- prometheus.MustNewConstMetric(c.tunTx, ctr, float64(t.TXPackets))
		for r := range tundev.NumTUNDropReasons {
			ch <- prometheus.MustNewConstMetric(c.tunDrops, ctr, float64(t.Drops[r]), r.String())
		}
		ch <- prometheus.MustNewConstMetric(c.tunICMPSent, ctr, float64(t.ICMPErrors))
		ch <- prometheus.MustNewConstMetric(c.tunICMPSuppressed, ctr, float64(t.ICMPSuppressed))
		ch <- prometheus.MustNewConstMetric(c.tunICMPSendErrors, ctr, float64(t.ICMPSendErrors))
	}
	if u := s.UDP; u != nil {
		ch <- prometheus.MustNewConstMetric(c.udpRx, ctr, float64(u.RXPackets))
		ch <- prometheus.MustNewConstMetric(c.udpTx, ctr, float64(u.TXPackets))
		for r := range numUDPDropReasons {
			ch <- prometheus.MustNewConstMetric(c.udpDrops, ctr, float64(u.Drops[r]), r.String())
		}
	}
	if cs := s.Compat; cs != nil {
		ch <- prometheus.MustNewConstMetric(c.compatRx, ctr, float64(cs.Bind.RXPackets), "wan")
		ch <- prometheus.MustNewConstMetric(c.compatTx, ctr, float64(cs.Bind.TXPackets), "wan")
		ch <- prometheus.MustNewConstMetric(c.compatRx, ctr, float64(cs.LAN.RXPackets), "lan")
		ch <- prometheus.MustNewConstMetric(c.compatTx, ctr, float64(cs.LAN.TXPackets), "lan")
		for r := range bind.NumDropReasons {
			ch <- prometheus.MustNewConstMetric(c.compatDrops, ctr, float64(cs.Bind.Drops[r]), "wan", r.String())
		}
		for r := range tundev.NumPortDropReasons {
			ch <- prometheus.MustNewConstMetric(c.compatDrops, ctr, float64(cs.LAN.Drops[r]), "lan", r.String())
		}
		ch <- prometheus.MustNewConstMetric(c.compatICMPSent, ctr, float64(cs.LAN.ICMPErrors))
		ch <- prometheus.MustNewConstMetric(c.compatICMPSuppressed, ctr, float64(cs.LAN.ICMPSuppressed))
		ch <- prometheus.MustNewConstMetric(c.compatFragmented, ctr, float64(cs.LAN.Fragmented))
		ch <- prometheus.MustNewConstMetric(c.compatPeerToPeer, ctr, float64(cs.LAN.PeerToPeer))
		ch <- prometheus.MustNewConstMetric(c.compatWANFragmented, ctr, float64(cs.Bind.Fragmented))
		ch <- prometheus.MustNewConstMetric(c.compatWANFragments, ctr, float64(cs.Bind.Fragments))
		ch <- prometheus.MustNewConstMetric(c.compatWANFromKernel, ctr, float64(cs.Bind.FromKernel))
		for i, st := range cs.WANQueues {
			c.collectKernel(ch, "wan", strconv.Itoa(i), st)
		}
		for i, st := range cs.LANQueues {
			c.collectKernel(ch, "lan", strconv.Itoa(i), st)
		}
	}
	if s.Device == nil {
		// Compat modes: wireguard-go's peers, read with the counters
		// (serveCompatMetrics), the first MetricsPeers of them kept.
		if n := s.PeersConfigured; n != nil {
			ch <- prometheus.MustNewConstMetric(c.peerCount, prometheus.GaugeValue, float64(*n))
			if c.maxPeers > 0 && *n <= uint64(c.maxPeers) {
				c.collectPeers(ch, s.Peers)
			}
		}
		return
	}
	ch <- prometheus.MustNewConstMetric(c.peerCount, prometheus.GaugeValue, float64(s.Device.PeersConfigured))
	if c.maxPeers <= 0 || s.Device.PeersConfigured > uint64(c.maxPeers) {
		return
	}
	// Peers added since the count: none is read past the limit.
	if ps, ok := c.peers(c.maxPeers); ok {
		c.collectPeers(ch, ps)
	}
}

// collectPeers sends the per-peer metrics of ps.
func (c *collector) collectPeers(ch chan<- prometheus.Metric, ps []PeerStat) {
	ctr := prometheus.CounterValue
	for _, p := range ps {
		ch <- prometheus.MustNewConstMetric(c.peerRx, ctr, float64(p.RxBytes), p.PublicKey)
		ch <- prometheus.MustNewConstMetric(c.peerTx, ctr, float64(p.TxBytes), p.PublicKey)
		hs := 0.0
		if !p.LastHandshake.IsZero() {
			hs = float64(p.LastHandshake.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.peerHandshake, prometheus.GaugeValue, hs, p.PublicKey)
	}
}

// collectKernel sends the kernel's counters of queue qs of port's AF_XDP
// socket in st.Backend (absent while the socket is closed, and for other
// backends): its drops and the times it found the fill ring empty.
func (c *collector) collectKernel(ch chan<- prometheus.Metric, port, qs string, st dataplane.Stats) {
	for _, k := range dataplane.LossCounters {
		if v, ok := st.Backend[k]; ok {
			ch <- prometheus.MustNewConstMetric(c.kernelDrops, prometheus.CounterValue, float64(v), port, qs, strings.TrimPrefix(k, "xsk_"))
		}
	}
	if v, ok := st.Backend[fillRingEmptyKey]; ok {
		ch <- prometheus.MustNewConstMetric(c.fillRingEmpty, prometheus.CounterValue, float64(v), port, qs)
	}
}

// metricsTimeout bounds how long the metrics server waits for a request's
// headers and lets a connection idle; a reply gets metricsWriteTimeout.
const (
	metricsTimeout      = 10 * time.Second
	metricsWriteTimeout = time.Minute
)

// metricsMaxScrapes is how many scrapes of /metrics are served at once;
// more are answered 503 Service Unavailable at once. Each scrape gathers
// and formats every series (per-peer too, up to MetricsPeers): 200 at once
// at 20,000 peers with MetricsPeers = 100000 took the gateway from 220 MB
// to 3 GB, and most of them timed out. An HA pair of Prometheus servers
// and a person's curl fit.
const metricsMaxScrapes = 4

// metricsMaxConns is how many connections the metrics endpoint holds at
// once (netutil.LimitListener): more wait in the listen backlog, not
// accepted, until one ends (a silent one within metricsTimeout). Without
// it every connection had a goroutine and a descriptor for up to
// metricsTimeout, bounded only by how fast a client opened them: 800
// half-open connections were 800 goroutines, and a flood could take
// every descriptor the UAPI and kernel sockets need. The UAPI, stats and
// capture sockets have bounds of their own.
const metricsMaxConns = 64

// metricsServer returns the HTTP server of the metrics endpoint, which
// may listen on every address (MetricsAddress ":9586"): a client that
// sends its headers slowly or never (slowloris), or holds a connection
// idle, is disconnected after timeout, so that connections, and the
// goroutine and buffers each holds, stay bounded by the rate they arrive
// at; http.Serve's default server waits for ever.
func metricsServer(h http.Handler, timeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: timeout,
		ReadTimeout:       timeout,
		IdleTimeout:       timeout,
		WriteTimeout:      metricsWriteTimeout,
		MaxHeaderBytes:    16 << 10,
	}
}

// reloadMetrics exports st in the names Prometheus' own servers use for
// their configuration reloads, so that one alert rule covers them:
// wgpio_config_last_reload_successful (1, or 0 after a SIGHUP whose file
// was not applied) and wgpio_config_last_reload_success_timestamp_seconds
// (the start, or the last reload applied).
func reloadMetrics(name string, st *reloadState) []prometheus.Collector {
	l := prometheus.Labels{"device": name}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wgpio_config_last_reload_successful", ConstLabels: l,
			Help: "Whether the last reload (SIGHUP, systemctl reload) applied the configuration file: 1 yes (or none since the start), 0 no (the file did not parse or was refused: see the log)."},
			func() float64 {
				if st.failed.Load() {
					return 0
				}
				return 1
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wgpio_config_last_reload_success_timestamp_seconds", ConstLabels: l,
			Help: "Unix time of the start or of the last reload that applied the configuration file."},
			func() float64 { return float64(st.successNs.Load()) / 1e9 }),
	}
}

// listenMetrics listens on w.MetricsAddress. Its error names the file,
// line and key (or -metrics-addr) and the listener's error, as the other
// errors found at start do.
// checkMetricsAddr refuses what -metrics-addr cannot be, as the file's
// MetricsAddress is refused: not host:port, or a port out of 1-65535
// (net.Listen takes port 0 as any free port, which no scraper finds).
func checkMetricsAddr(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("want host:port, as in 127.0.0.1:9586")
	}
	if x, err := strconv.ParseUint(port, 10, 16); err != nil || x == 0 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return nil
}

func listenMetrics(file string, w config.WGPIO) (net.Listener, error) {
	ln, err := net.Listen("tcp", w.MetricsAddress)
	if err != nil {
		return nil, keyError(file, w.Lines, "MetricsAddress", "metrics-addr",
			fmt.Sprintf("cannot serve metrics on %s: %v (another process holds the port, or the address is not this host's: choose another host:port)", w.MetricsAddress, err))
	}
	return ln, nil
}

// metricsRegistry returns the registry /metrics serves: the gateway's
// counters, the reloads' outcome st, and the process's own health as
// every Go exporter names it: the Go runtime's (go_goroutines, go_threads,
// go_memstats_heap_inuse_bytes, ...) and the process's
// (process_resident_memory_bytes, process_open_fds, ...), which a long
// run watches for leaks.
func metricsRegistry(name string, stats func() GatewayStats, peers func(max int) ([]PeerStat, bool), maxPeers int, st *reloadState) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		newCollector(name, maxPeers, stats, peers),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range append(cs, reloadMetrics(name, st)...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return reg, nil
}

// serveMetrics serves /metrics on ln in the background, until ln is
// closed: metricsRegistry's metrics, over at most metricsMaxConns
// connections at once. A failed accept is logged on log
// (once per run of failures) and tried again (acceptloop.Retrying):
// net/http's own loop ended at ENOBUFS, ENOMEM or EPROTO, the socket
// closed until a restart, said only on stdout.
func serveMetrics(log *slog.Logger, ln net.Listener, name string, stats func() GatewayStats, peers func(max int) ([]PeerStat, bool), maxPeers int, st *reloadState) error {
	reg, err := metricsRegistry(name, stats, peers, maxPeers, st)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: metricsMaxScrapes}))
	srv := metricsServer(mux, metricsTimeout)
	ln = netutil.LimitListener(acceptloop.Retrying(ln, func(err error) { log.Warn("metrics socket: accept failed; trying again", "err", err) }), metricsMaxConns)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("metrics server ended", "err", err)
		}
	}()
	return nil
}

// metricsPeers is w's MetricsPeers as the collector's maxPeers: the
// default when unset, below 1 when off.
func metricsPeers(w config.WGPIO) int {
	if w.MetricsPeers == 0 {
		return config.DefaultMetricsPeers
	}
	return w.MetricsPeers
}

// boundedPeerStats returns the collector's peers function for dev: the
// peers' PeerStats (without Endpoint, which no metric exports) when dev
// has at most max peers, read under the count's lock
// (gateway.Device.PeerStatesUpTo), else false. It reuses one buffer of
// states across scrapes, at most max long; concurrent scrapes take
// turns.
func boundedPeerStats(dev *gateway.Device) func(max int) ([]PeerStat, bool) {
	var mu sync.Mutex
	var buf []gateway.PeerState
	return func(max int) ([]PeerStat, bool) {
		mu.Lock()
		defer mu.Unlock()
		var ok bool
		if buf, ok = dev.PeerStatesUpTo(buf[:0], max); !ok {
			return nil, false
		}
		out := make([]PeerStat, len(buf))
		for i, p := range buf {
			out[i] = PeerStat{PublicKey: p.PublicKey.Base64(), LastHandshake: p.LastHandshake, TxBytes: p.TxBytes, RxBytes: p.RxBytes}
		}
		return out, true
	}
}
