// Package header reads and writes the headers wgpio meets on the wire, as
// views over byte slices: Ethernet II with an optional IEEE 802.1Q tag, IPv4
// (RFC 791, options allowed, RFC 1071 header checksum, fragments reported),
// IPv6 (RFC 8200, extension headers walked: Hop-by-Hop Options, Routing,
// Fragment and Destination Options), UDP (RFC 768, pseudo-header checksum
// optional on IPv4 and mandatory on IPv6 per RFC 8200 §8.1), and the ICMP
// errors a router in front of a tunnel sends: ICMPv4 "fragmentation needed"
// (RFC 792, RFC 1191 §4) and ICMPv6 "packet too big" (RFC 4443 §3.2) when a
// packet is too large, time exceeded (RFC 792, RFC 4443 §3.3) when its TTL
// or hop limit runs out.
//
// What a router does to a forwarded packet is here too: Forward (TTL or hop
// limit − 1 with an incremental checksum update, RFC 1812 §5.3.1),
// IPv4Fragmenter (RFC 791 §3.2), EncapECN and DecapECN (RFC 6040, as the
// kernel's WireGuard), ClampMSS (the TCP MSS option of SYNs), and the
// judgement of a transit packet's addresses and options as Linux's
// forwarding path makes it (TransitAddrs, TransitOptions; PlainUnicast and
// OptionsPlain settle the common packet inline), which both modes' data
// paths share.
//
// Views (Ethernet, IPv4, IPv6, UDP, ICMP) are byte slices with accessor
// methods. An accessor reads fixed offsets and assumes the slice was checked
// first (by Parse, ParseIP or the view's documented minimum length); the
// views never copy and never allocate.
//
// Parse is the hot-path entry: one call fills a caller-owned Packet with
// offsets and addresses, or returns a Reason saying why the frame is
// truncated or inconsistent. Length fields are trusted over the frame
// length, so Ethernet padding never appears in a payload, and nothing reads
// past a slice. ParseIP does the same for a bare IP packet, and ParseL3
// checks only its IP header, as a router does before forwarding; a
// forwarder that called Parse or ParseIP asks Reason.IPHeaderOK whether the
// IP header was sound even when what follows it was not.
//
// The Put functions write headers in place into a caller's buffer (the
// headroom in front of a sealed WireGuard message) and return the bytes
// written; they allocate nothing. Checksum, FoldChecksum,
// PseudoHeaderChecksum and UpdateChecksum (RFC 1624) compute the Internet
// checksum eight bytes per step.
//
// Every function is safe for concurrent use on distinct buffers; none keeps
// a reference to a slice it is given.
package header
