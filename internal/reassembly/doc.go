// Package reassembly puts IPv4 and IPv6 datagrams back together from their
// fragments (RFC 791 §3.2, RFC 815, RFC 8200 §4.5), within fixed bounds, as
// a Linux host does for its sockets: a gateway in the owned address mode,
// whose kernel has no address on the WAN and so reassembles nothing for it,
// reassembles the WireGuard datagrams that peers send as IP fragments
// itself (fastpath's Config.Reassemble).
//
// A Reassembler keys a datagram in progress as RFC 791 §3.2 and RFC 8200
// §4.5 do: IPv4 by source, destination, protocol and 16-bit
// identification; IPv6 by source, destination and 32-bit identification.
// It keeps, per datagram, the byte ranges received (runs, the complement
// of RFC 815's holes) and the data in pages of a preallocated arena, and
// hands the fragmentable part (the IPv4 payload, or the IPv6 payload after
// the Fragment header: the upper-layer header and data) back once the
// last fragment has come and no hole is left.
//
// What it drops, each fragment counted once by reason (Stats.Drops):
//
//   - a fragment that does not parse, is no fragment, carries no data, or
//     (IPv6) is not the last and carries a length that is not a multiple
//     of 8 bytes (RFC 8200 §4.5): bad_header. An IPv4 one that is not the
//     last and whose length is not a multiple of 8 is cut to one, as Linux
//     does (ip_frag_queue);
//   - a first fragment (offset 0) shorter than Config.MinFirst bytes
//     (the upper-layer header: 8 for UDP): tiny_first, the tiny fragment
//     attack of RFC 1858 §3 and RFC 3128, and RFC 7112's rule that the
//     first fragment carry the whole header chain;
//   - a fragment that would make the datagram longer than 65,535 bytes of
//     IP packet (IPv4 total length; IPv6 payload length, RFC 8200 §4.5):
//     too_big;
//   - a fragment whose bytes were all received already: duplicate, that
//     fragment alone (RFC 8200 §4.5 lets exact duplicates be dropped
//     alone; Linux drops alone any fragment that lies within bytes it
//     holds, as here);
//   - a fragment that overlaps bytes received in part: overlap, the whole
//     datagram with every fragment of it received so far (RFC 5722 for
//     IPv6; the overlapping fragment attacks of RFC 1858 §4 and RFC 3128
//     for IPv4, where Linux does the same since 4.19). Fragments of it
//     that come later start a new datagram, which times out;
//   - a fragment that contradicts the datagram's length (a second last
//     fragment ending elsewhere, a fragment past the last one's end, a
//     last fragment ending before bytes received): inconsistent, the
//     whole datagram, as Linux (ip_frag_queue's "corrupted");
//   - a datagram with more than MaxRuns separate runs of bytes (holes
//     between them): too_many_holes, the whole datagram (a bound on work
//     per fragment Linux does not have: its red-black tree of runs is
//     bounded only by memory);
//   - a datagram not completed within the timeout: timeout, its
//     fragments (Config.Timeout4, Timeout6: 30 s as Linux's
//     net.ipv4.ipfrag_time, 60 s as net.ipv6.ip6frag_time and RFC 8200
//     §4.5). Linux then sends an ICMP "fragment reassembly time exceeded"
//     (RFC 792, RFC 4443 §3.3) when it had the first fragment; a
//     Reassembler sends nothing (a WireGuard peer does not act on one);
//   - when Config.MaxDatagrams are in progress, a fragment that starts
//     another evicts the datagram started first: table_full, its fragments; when
//     the arena (Config.MaxBytes) has no free page for a fragment, the
//     oldest other datagrams are evicted until it has: memory_full. Linux
//     instead drops every fragment while it holds more than
//     net.ipv4.ipfrag_high_thresh (4 MiB), until timeouts free some: here
//     the stale datagrams (an attacker's, which never complete) make room
//     for fresh ones;
//   - reasons the caller gives for a datagram it refuses after
//     reassembly (Discard): udp_malformed, udp_checksum, not_for_us.
//
// Bounds: Config.MaxDatagrams datagrams (default 256) and Config.MaxBytes
// bytes of data pages (default 4 MiB, Linux's ipfrag_high_thresh; pages
// of PageSize bytes, so a fragment holds at least one page, as a Linux
// fragment holds at least its buffer's truesize), both allocated by New;
// MaxRuns runs per datagram; one output buffer of 65,535 bytes. Add,
// Expire and Discard allocate nothing.
//
// Why a reassembler of our own: no maintained Go library reassembles both
// families within such bounds and without allocating per fragment.
// gopacket's ip4defrag handles IPv4 only, allocates per fragment
// (container/list, a new packet per datagram), bounds neither datagrams
// nor bytes, and github.com/google/gopacket is no longer maintained;
// gVisor's reassembler is an internal package of its network stack, not
// importable apart from it.
//
// A Reassembler is not safe for concurrent use: its user serializes Add,
// Expire and Discard (fastpath's workers share one under a mutex, since
// fragments of one datagram may arrive on different RX queues). Stats may
// be read from any goroutine.
package reassembly
