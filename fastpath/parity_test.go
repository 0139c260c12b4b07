package fastpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// ip4 is an IPv4 packet for the parity table: UDP (8 + 32 bytes, checksum
// 0, RFC 768) unless payload is given, DF set, TTL 64, then edited by the
// case's fields.
type ip4 struct {
	src, dst string
	ttl      uint8 // 0 means 64; use ttl0 for 0
	ttl0     bool
	proto    uint8
	opts     []byte
	flags    uint16 // the flags and fragment offset field; 0 means DF
	badSum   bool
	total    int // IPv4 total length to write instead of the real one
	ihl      int // IHL to write instead of the real one
	payload  []byte
	pad      int // Ethernet padding after the packet
}

func (c ip4) bytes() []byte {
	pl := c.payload
	if pl == nil {
		pl = make([]byte, header.UDPLen+32)
		header.PutUDP(pl, 1000, 2000, 32)
	}
	hl := header.IPv4MinLen + len(c.opts)
	b := make([]byte, hl+len(pl)+c.pad)
	proto := c.proto
	if proto == 0 {
		proto = header.ProtoUDP
	}
	f := header.IPv4Fields{Protocol: proto, Src: netip.MustParseAddr(c.src).As4(), Dst: netip.MustParseAddr(c.dst).As4()}
	header.PutIPv4(b, &f, len(pl))
	copy(b[hl:], pl)
	copy(b[header.IPv4MinLen:], c.opts)
	b[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(b[2:4], uint16(hl+len(pl)))
	fl := c.flags
	if fl == 0 {
		fl = 0x4000
	}
	binary.BigEndian.PutUint16(b[6:8], fl)
	switch {
	case c.ttl0:
		b[8] = 0
	case c.ttl != 0:
		b[8] = c.ttl
	default:
		b[8] = 64
	}
	if c.total != 0 {
		binary.BigEndian.PutUint16(b[2:4], uint16(c.total))
	}
	if c.ihl != 0 {
		b[0] = 0x40 | byte(c.ihl)
	}
	binary.BigEndian.PutUint16(b[10:12], 0)
	binary.BigEndian.PutUint16(b[10:12], ^header.FoldChecksum(header.Checksum(b[:hl], 0)))
	if c.badSum {
		b[10] ^= 0x55
	}
	return b
}

// ip6 is an IPv6 packet for the parity table: UDP (8 + 32 bytes) after
// the extension headers ext (ext[0] is the first one's type), hop limit
// 64 unless hl or hl0.
type ip6 struct {
	src, dst string
	hl       uint8
	hl0      bool
	ext      []byte
	plen     int // payload length to write instead of the real one
}

func (c ip6) bytes() []byte {
	u := make([]byte, header.UDPLen+32)
	header.PutUDP(u, 1000, 2000, 32)
	binary.BigEndian.PutUint16(u[6:8], 0x1234) // not verified by a router
	nh := uint8(header.ProtoUDP)
	var ext []byte
	if len(c.ext) > 0 {
		nh, ext = c.ext[0], c.ext[1:]
	}
	b := make([]byte, header.IPv6Len+len(ext)+len(u))
	f := header.IPv6Fields{NextHeader: nh, Src: netip.MustParseAddr(c.src).As16(), Dst: netip.MustParseAddr(c.dst).As16()}
	header.PutIPv6(b, &f, len(ext)+len(u))
	copy(b[header.IPv6Len:], ext)
	copy(b[header.IPv6Len+len(ext):], u)
	switch {
	case c.hl0:
		b[7] = 0
	case c.hl != 0:
		b[7] = c.hl
	default:
		b[7] = 64
	}
	if c.plen != 0 {
		binary.BigEndian.PutUint16(b[4:6], uint16(c.plen))
	}
	return b
}

type packetBuilder interface{ bytes() []byte }

// parityCase is one unusual packet and what a Linux router does with it
// when it forwards it into wg0 or out of it (observed on Linux 6.18 in
// namespaces, a plain routed veth router, rp_filter 0).
type parityCase struct {
	name string
	pkt  packetBuilder
	fwd  bool // forwarded
	// icmp is the ICMP(v6) error type answered to the sender, 0 for
	// none. From the tunnel an error to a link-local sender does not
	// reach it: the far gateway does not forward it to its LAN (nor does
	// Linux).
	icmp uint8
}

// The addresses of the rig's hosts, as strings for the tables.
const (
	pA, pB   = "198.19.1.10", "198.19.2.10"
	pA6, pB6 = "2001:db8:1::10", "2001:db8:2::10"
)

var (
	recordRoute = []byte{7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1} // room for 2 addresses, NOP
	routerAlert = []byte{0x94, 4, 0, 0}
	hbhAlertHdr = []byte{0, header.ProtoUDP, 0, 5, 2, 0, 0, 1, 0}  // Hop-by-Hop: router alert (MLD), PadN
	atomicFrag  = []byte{44, header.ProtoUDP, 0, 0, 0, 0, 0, 0, 1} // Fragment header, offset 0, M 0 (RFC 6946)
)

// sourceRoute is an IPv4 loose (0x83) or strict (0x89) source route
// option through hop, then a NOP.
func sourceRoute(typ byte, hop string) []byte {
	a := netip.MustParseAddr(hop).As4()
	return append([]byte{typ, 7, 4, a[0], a[1], a[2], a[3]}, 1)
}

// hbhUnknown is a Hop-by-Hop header (type in front) with one option of
// type typ, 4 bytes of data.
func hbhUnknown(typ byte) []byte { return []byte{0, header.ProtoUDP, 0, typ, 4, 0, 0, 0, 0} }

// calipsoHBH is a Hop-by-Hop header (type in front) of 16 bytes holding a
// well-formed CALIPSO option (RFC 5570 §5.1) of DOI doi, no compartment
// bitmap, sensitivity 0, and its checksum (CRC-16/CCITT, reflected, over
// the option with the checksum field zero, complemented, low byte
// first), then PadN.
func calipsoHBH(doi uint32) []byte {
	opt := []byte{7, 8, byte(doi >> 24), byte(doi >> 16), byte(doi >> 8), byte(doi), 0, 0, 0, 0}
	crc := uint16(0xffff)
	for _, c := range opt {
		crc ^= uint16(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x8408
			} else {
				crc >>= 1
			}
		}
	}
	crc = ^crc
	opt[8], opt[9] = byte(crc), byte(crc>>8)
	return append(append([]byte{0, header.ProtoUDP, 1}, opt...), 1, 2, 0, 0)
}

// hbhOptions is a Hop-by-Hop header (type in front) of 24 bytes with n
// (8 or 9) empty options of an unknown type to skip, then PadN.
func hbhOptions(n int) []byte {
	b := []byte{0, header.ProtoUDP, 2}
	for range n {
		b = append(b, 0x1e, 0)
	}
	b = append(b, 1, byte(20-2*n))
	return append(b, make([]byte, 20-2*n)...)
}

// routing0 is a type 0 Routing header (type in front) with one address
// left to visit, hop.
func routing0(hop string) []byte {
	a := netip.MustParseAddr(hop).As16()
	return append([]byte{header.ProtoRouting, header.ProtoUDP, 2, 0, 1, 0, 0, 0, 0}, a[:]...)
}

func parityCases(src, dst, src6, dst6 string) []parityCase {
	icmpErr := make([]byte, 8+28) // destination unreachable quoting a packet
	icmpErr[0], icmpErr[1] = 3, 1
	copy(icmpErr[8:], ip4{src: dst, dst: src}.bytes())
	binary.BigEndian.PutUint16(icmpErr[2:4], ^header.FoldChecksum(header.Checksum(icmpErr, 0)))
	echo := make([]byte, 8+16)
	echo[0] = 8
	binary.BigEndian.PutUint16(echo[2:4], ^header.FoldChecksum(header.Checksum(echo, 0)))
	return []parityCase{
		{"v4 baseline", ip4{src: src, dst: dst}, true, 0},
		{"v4 src 0.0.0.0", ip4{src: "0.0.0.0", dst: dst}, false, 0},
		{"v4 src 0.1.2.3", ip4{src: "0.1.2.3", dst: dst}, true, 0},
		{"v4 src 127.0.0.1", ip4{src: "127.0.0.1", dst: dst}, false, 0},
		{"v4 src 224.1.1.1", ip4{src: "224.1.1.1", dst: dst}, false, 0},
		{"v4 src 255.255.255.255", ip4{src: "255.255.255.255", dst: dst}, false, 0},
		{"v4 src 240.0.0.1", ip4{src: "240.0.0.1", dst: dst}, true, 0},
		{"v4 src 169.254.1.1", ip4{src: "169.254.1.1", dst: dst}, true, 0},
		{"v4 dst 0.0.0.0", ip4{src: src, dst: "0.0.0.0"}, false, 0},
		{"v4 dst 0.1.2.3", ip4{src: src, dst: "0.1.2.3"}, true, 0},
		{"v4 dst 127.0.0.1", ip4{src: src, dst: "127.0.0.1"}, false, 0},
		{"v4 dst 255.255.255.255", ip4{src: src, dst: "255.255.255.255"}, false, 0},
		{"v4 dst 224.0.0.1", ip4{src: src, dst: "224.0.0.1"}, false, 0},
		{"v4 dst 239.1.1.1", ip4{src: src, dst: "239.1.1.1"}, false, 0},
		{"v4 dst 240.0.0.1", ip4{src: src, dst: "240.0.0.1"}, true, 0},
		{"v4 dst 169.254.1.1", ip4{src: src, dst: "169.254.1.1"}, true, 0},
		{"v4 record route", ip4{src: src, dst: dst, opts: recordRoute}, true, 0},
		{"v4 router alert", ip4{src: src, dst: dst, opts: routerAlert}, true, 0},
		{"v4 loose source route", ip4{src: src, dst: dst, opts: sourceRoute(0x83, dst)}, false, 0},
		{"v4 strict source route", ip4{src: src, dst: dst, opts: sourceRoute(0x89, dst)}, false, 0},
		{"v4 timestamp", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, true, 0},
		{"v4 unknown option", ip4{src: src, dst: dst, opts: []byte{0x9e, 4, 0, 0}}, true, 0},
		// Linux answers parameter problem (12), and so does the
		// gateway (optionserr.go).
		{"v4 option length past the header", ip4{src: src, dst: dst, opts: []byte{7, 40, 4, 0}}, false, 12},
		// Options Linux's ip_options_compile rejects (observed on
		// Linux 6.18; it answers all but a well-formed source route
		// with parameter problem (12), TestOptionsAgainstLinux) and
		// their valid neighbours.
		{"v4 record route pointer 3", ip4{src: src, dst: dst, opts: []byte{7, 11, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1}}, false, 12},
		{"v4 record route pointer in the last address", ip4{src: src, dst: dst, opts: []byte{7, 11, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1}}, false, 12},
		{"v4 record route full", ip4{src: src, dst: dst, opts: []byte{7, 11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 1}}, true, 0},
		{"v4 record route length 2", ip4{src: src, dst: dst, opts: []byte{7, 2, 1, 1}}, false, 12},
		{"v4 two record routes", ip4{src: src, dst: dst, opts: []byte{7, 7, 4, 0, 0, 0, 0, 7, 7, 4, 0, 0, 0, 0, 1, 1}}, false, 12},
		{"v4 timestamp pointer 4", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, false, 12},
		{"v4 timestamp length 3", ip4{src: src, dst: dst, opts: []byte{0x44, 3, 5, 1}}, false, 12},
		{"v4 timestamp pairs without room", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0}}, false, 12},
		{"v4 timestamp pairs", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0}}, true, 0},
		{"v4 timestamp full, overflow 15", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 13, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0}}, false, 12},
		{"v4 timestamp full, overflow 14", ip4{src: src, dst: dst, opts: []byte{0x44, 12, 13, 0xe0, 0, 0, 0, 0, 0, 0, 0, 0}}, true, 0},
		{"v4 two timestamps", ip4{src: src, dst: dst, opts: []byte{0x44, 8, 5, 0, 0, 0, 0, 0, 0x44, 8, 5, 0, 0, 0, 0, 0}}, false, 12},
		{"v4 router alert length 2", ip4{src: src, dst: dst, opts: []byte{0x94, 2, 1, 1}}, false, 12},
		{"v4 CIPSO", ip4{src: src, dst: dst, opts: []byte{0x86, 8, 0, 0, 0, 1, 0, 0}}, false, 12},
		{"v4 TTL 1", ip4{src: src, dst: dst, ttl: 1}, false, 11},
		{"v4 TTL 0", ip4{src: src, dst: dst, ttl0: true}, false, 11},
		{"v4 TTL 1 echo request", ip4{src: src, dst: dst, ttl: 1, proto: header.ProtoICMPv4, payload: echo}, false, 11},
		{"v4 TTL 1 ICMP error", ip4{src: src, dst: dst, ttl: 1, proto: header.ProtoICMPv4, payload: icmpErr}, false, 0},
		{"v4 TTL 1 non-first fragment", ip4{src: src, dst: dst, ttl: 1, flags: 100, payload: make([]byte, 32)}, false, 0},
		{"v4 TTL 1 dst multicast", ip4{src: src, dst: "239.1.1.1", ttl: 1}, false, 0},
		{"v4 bad header checksum", ip4{src: src, dst: dst, badSum: true}, false, 0},
		{"v4 total length past the frame", ip4{src: src, dst: dst, total: 200}, false, 0},
		{"v4 total length below the header", ip4{src: src, dst: dst, total: 10}, false, 0},
		{"v4 IHL 4", ip4{src: src, dst: dst, ihl: 4}, false, 0},
		{"v4 Ethernet padding", ip4{src: src, dst: dst, payload: make([]byte, 8), pad: 30}, true, 0},
		{"v4 non-first fragment", ip4{src: src, dst: dst, flags: 100, payload: make([]byte, 32)}, true, 0},
		{"v4 first fragment", ip4{src: src, dst: dst, flags: 0x2000}, true, 0},
		{"v6 baseline", ip6{src: src6, dst: dst6}, true, 0},
		{"v6 src ::", ip6{src: "::", dst: dst6}, false, 0},
		{"v6 src ::1", ip6{src: "::1", dst: dst6}, false, 0},
		{"v6 src ff02::1", ip6{src: "ff02::1", dst: dst6}, false, 0},
		{"v6 src ff0e::1", ip6{src: "ff0e::1", dst: dst6}, false, 0},
		// Linux answers destination unreachable (1), beyond scope of
		// source address (scope.go), after time exceeded (3).
		{"v6 src fe80::1", ip6{src: "fe80::1", dst: dst6}, false, 1},
		{"v6 src fe80::1 hop limit 1", ip6{src: "fe80::1", dst: dst6, hl: 1}, false, 3},
		{"v6 src fe80::1 dst fe80::2", ip6{src: "fe80::1", dst: "fe80::2"}, false, 0},
		{"v6 src fe80::1 dst ff0e::1", ip6{src: "fe80::1", dst: "ff0e::1"}, false, 0},
		{"v6 src IPv4-mapped", ip6{src: "::ffff:" + src, dst: dst6}, true, 0},
		{"v6 src IPv4-compatible", ip6{src: "::" + src, dst: dst6}, true, 0},
		{"v6 dst ::", ip6{src: src6, dst: "::"}, true, 0},
		{"v6 dst ::1", ip6{src: src6, dst: "::1"}, false, 0},
		{"v6 dst fe80::1", ip6{src: src6, dst: "fe80::1"}, false, 0},
		{"v6 dst ff02::1", ip6{src: src6, dst: "ff02::1"}, false, 0},
		{"v6 dst ff05::1", ip6{src: src6, dst: "ff05::1"}, false, 0},
		{"v6 dst ff0e::1", ip6{src: src6, dst: "ff0e::1"}, false, 0},
		{"v6 dst IPv4-mapped", ip6{src: src6, dst: "::ffff:" + dst}, true, 0},
		{"v6 dst fec0::1", ip6{src: src6, dst: "fec0::1"}, true, 0},
		{"v6 hop limit 1", ip6{src: src6, dst: dst6, hl: 1}, false, 3},
		{"v6 hop limit 0", ip6{src: src6, dst: dst6, hl0: true}, false, 3},
		{"v6 hop limit 1 dst multicast", ip6{src: src6, dst: "ff0e::1", hl: 1}, false, 0},
		{"v6 hop-by-hop router alert", ip6{src: src6, dst: dst6, ext: hbhAlertHdr}, true, 0},
		{"v6 atomic fragment", ip6{src: src6, dst: dst6, ext: atomicFrag}, true, 0},
		{"v6 hop-by-hop unknown option, skip", ip6{src: src6, dst: dst6, ext: hbhUnknown(0x1e)}, true, 0},
		{"v6 hop-by-hop unknown option, discard", ip6{src: src6, dst: dst6, ext: hbhUnknown(0x5e)}, false, 0},
		// Linux answers parameter problem (4), and so does the
		// gateway (optionserr.go).
		{"v6 hop-by-hop unknown option, discard and answer", ip6{src: src6, dst: dst6, ext: hbhUnknown(0x9e)}, false, 4},
		{"v6 hop-by-hop unknown option, discard and answer unless multicast", ip6{src: src6, dst: dst6, ext: hbhUnknown(0xde)}, false, 4},
		// Hop-by-hop headers Linux's ip6_parse_tlv rejects (observed
		// on Linux 6.18, no ICMP error) and their valid neighbours.
		{"v6 hop-by-hop PadN of 14", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, false, 0},
		{"v6 hop-by-hop PadN of 6", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 1, 4, 0, 0, 0, 0}}, true, 0},
		{"v6 hop-by-hop PadN not zero", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 1, 4, 0, 0, 0, 1}}, false, 0},
		{"v6 hop-by-hop Pad1 6 times", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 0, 0, 0, 0, 0, 0}}, true, 0},
		{"v6 hop-by-hop Pad1 twice then PadN of 6", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 1, 0, 0, 1, 4, 0, 0, 0, 0, 1, 6, 0, 0, 0, 0, 0, 0}}, false, 0},
		{"v6 hop-by-hop router alert of 4 bytes", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 5, 4, 0, 0, 0, 0}}, false, 0},
		{"v6 hop-by-hop 8 options", ip6{src: src6, dst: dst6, ext: hbhOptions(8)}, true, 0},
		{"v6 hop-by-hop 9 options", ip6{src: src6, dst: dst6, ext: hbhOptions(9)}, false, 0},
		{"v6 hop-by-hop IOAM misaligned", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 0x31, 4, 0, 0, 0, 0}}, false, 0},
		{"v6 hop-by-hop IOAM aligned", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 0, 0, 0x31, 2, 0, 0}}, true, 0},
		{"v6 hop-by-hop CALIPSO short", ip6{src: src6, dst: dst6, ext: []byte{0, header.ProtoUDP, 0, 7, 4, 0, 0, 0, 0}}, false, 0},
		// A well-formed CALIPSO option, which Linux (NetLabel, no
		// CALIPSO DOI configured) drops as IPv4's CIPSO.
		{"v6 hop-by-hop CALIPSO, no DOI configured", ip6{src: src6, dst: dst6, ext: calipsoHBH(1)}, false, 0},
		{"v6 routing header type 0, segments left 1", ip6{src: src6, dst: dst6, ext: routing0(dst6)}, true, 0},
		{"v6 payload length past the frame", ip6{src: src6, dst: dst6, plen: 400}, false, 0},
	}
}

// allowAll gives both of the rig's peers every address (0.0.0.0/0, ::/0).
func allowAll(t *testing.T, r *rig) {
	t.Helper()
	all := [][]netip.Prefix{{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
	if err := r.a.SetPeers([]*Peer{r.peerAB}, all); err != nil {
		t.Fatal(err)
	}
	if err := r.b.SetPeers([]*Peer{r.peerBA}, all); err != nil {
		t.Fatal(err)
	}
}

// sealToB seals the IP packet ip (any bytes) as gateway A's worker would
// and puts it on B's WAN, so that B's inbound sees exactly ip as the
// decrypted inner packet.
func sealToB(t *testing.T, r *rig, ip []byte) {
	t.Helper()
	wa := r.a.workers[0]
	var fr [1]dataplane.Frame
	if wa.lanTX.Alloc(fr[:]) != 1 {
		t.Fatal("Alloc: pool empty")
	}
	f := &fr[0]
	f.SetLen(len(ip))
	copy(f.Data(), ip)
	kp, ep := r.peerAB.Current.Load(), r.peerAB.Endpoint.Load()
	c, n := kp.ReserveNonces(1)
	if n != 1 || !wa.seal(f, wa.peerState(r.peerAB), kp, ep, c) {
		t.Fatal("seal failed")
	}
	sendAll(t, r.wanA, 0, fr[:])
}

// drainPort frees what waits on port's queue 0 and returns copies of it.
func drainPort(p interface{ Queue(int) dataplane.Queue }) [][]byte {
	var out [][]byte
	buf := make([]dataplane.Frame, 64)
	rx := p.Queue(0).RX()
	for {
		n := rx.Receive(buf)
		if n == 0 {
			return out
		}
		for i := range n {
			out = append(out, bytes.Clone(buf[i].Data()))
		}
		rx.Free(buf[:n])
	}
}

// icmpType returns the ICMP or ICMPv6 type of the error frame d, or 0.
func icmpType(d []byte) uint8 {
	var p header.Packet
	if header.Parse(d, &p) != header.OK || (p.Proto != header.ProtoICMPv4 && p.Proto != header.ProtoICMPv6) {
		return 0
	}
	return d[p.L4Off]
}

// TestRouterParity: the fast path does with unusual packets what a Linux
// router does when it forwards them into wg0 (LAN → tunnel) and out of it
// (tunnel → LAN), with every peer's allowed IPs 0.0.0.0/0 and ::/0: it
// forwards what Linux forwards, drops what Linux drops (each drop
// counted by reason) and answers with the ICMP error Linux sends, or none.
func TestRouterParity(t *testing.T) {
	// The errors' rate limits are tested apart (icmpbudget_test.go,
	// unreach_test.go): here every error the table owes is sent.
	t.Run("into the tunnel", func(t *testing.T) {
		r := newRig(t, rigConfig{icmpDest: -1})
		allowAll(t, r)
		for _, c := range parityCases(pA, pB, pA6, pB6) {
			ip := c.pkt.bytes()
			before := r.a.Stats()[0]
			sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip)})
			r.a.workers[0].outbound(r.clock.Now())
			after := r.a.Stats()[0]
			back := drainPort(r.hostA)
			fwd := after.Encrypted == before.Encrypted+1
			check(t, c, true, fwd, back, &before, &after)
			// What crossed is the packet, its TTL lowered at A and
			// at B, without the Ethernet padding.
			r.b.workers[0].inbound(r.clock.Now())
			lan := drainPort(r.hostB)
			if fwd && c.fwd {
				wantDelivered(t, c, ip, lan, 2)
			}
		}
	})
	t.Run("out of the tunnel", func(t *testing.T) {
		r := newRig(t, rigConfig{icmpDest: -1})
		allowAll(t, r)
		for _, c := range parityCases(pA, pB, pA6, pB6) {
			ip := c.pkt.bytes()
			before := r.b.Stats()[0]
			sealToB(t, r, ip)
			r.b.workers[0].inbound(r.clock.Now())
			after := r.b.Stats()[0]
			lan := drainPort(r.hostB)
			// B's answers go into the tunnel: open them at A.
			r.a.workers[0].inbound(r.clock.Now())
			back := drainPort(r.hostA)
			check(t, c, false, len(lan) == 1, back, &before, &after)
			if c.fwd && len(lan) == 1 {
				wantDelivered(t, c, ip, lan, 1)
			}
		}
	})
}

// wantDelivered checks that lan holds one frame, the packet ip with its
// TTL or hop limit lowered hops times and without Ethernet padding.
func wantDelivered(t *testing.T, c parityCase, ip []byte, lan [][]byte, hops int) {
	t.Helper()
	want := bytes.Clone(ip)
	if p, ok := c.pkt.(ip4); ok {
		want = want[:len(want)-p.pad]
	}
	for range hops {
		header.DecrementHop(want)
	}
	if len(lan) != 1 || !bytes.Equal(lan[0][header.EthernetLen:], want) {
		t.Errorf("%s: hostB got %x, want %x", c.name, lan, want)
	}
}

func check(t *testing.T, c parityCase, fromLAN, fwd bool, back [][]byte, before, after *QueueStats) {
	t.Helper()
	drops := after.Drops
	for r := range NumDropReasons {
		drops[r] -= before.Drops[r]
	}
	var icmp uint8
	if len(back) == 1 {
		icmp = icmpType(back[0])
	}
	want := c.icmp
	switch ip := c.pkt.bytes(); {
	case !fromLAN && linkLocalSource(ip):
		want = 0
	case !fromLAN && linkLocalDest(ip) && !rcvDrop6(ip):
		// wg0 has no link-local prefix: no route (scope.go), where a
		// Linux router between two LANs (the table) drops it.
		want = 1
	}
	if fwd != c.fwd || icmp != want || len(back) > 1 {
		t.Errorf("%s: forwarded %v, ICMP type %d (%d frames back), drops %v; Linux: forwarded %v, ICMP type %d", c.name, fwd, icmp, len(back), drops.List(), c.fwd, want)
	}
	if !fwd && drops.Total() != 1 {
		t.Errorf("%s: not forwarded, drops %v: want one drop counted", c.name, drops.List())
	}
}

// TestMulticastFromTunnelToException: with an exception interface, a
// decrypted packet to a multicast address or 255.255.255.255 goes there
// (the host kernel delivers it, or not, as Linux's wg0 delivers such a
// packet locally), with the TTL it came out of the tunnel with, and never
// onto the LAN; a martian is dropped all the same.
func TestMulticastFromTunnelToException(t *testing.T) {
	var got [][]byte
	r := newRig(t, rigConfig{tunnelAddrs: []netip.Addr{netip.MustParseAddr("198.19.2.254")}, exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	allowAll(t, r)
	for _, c := range []struct {
		pkt       packetBuilder
		exception bool
	}{
		{ip4{src: pA, dst: "255.255.255.255"}, true},
		{ip4{src: pA, dst: "224.0.0.1", ttl: 1}, true},
		{ip6{src: pA6, dst: "ff02::1"}, true},
		{ip4{src: "127.0.0.1", dst: "224.0.0.1"}, false},
		{ip6{src: pA6, dst: "fe80::1"}, false},
	} {
		got = nil
		ip := c.pkt.bytes()
		d0 := TotalDrops(r.b.Stats())
		before := d0.Total()
		sealToB(t, r, ip)
		r.b.workers[0].inbound(r.clock.Now())
		lan := drainPort(r.hostB)
		d1 := TotalDrops(r.b.Stats())
		drops := d1.Total() - before
		switch {
		case len(lan) != 0:
			t.Errorf("%x: %d frames on the LAN, want none", ip[:40], len(lan))
		case c.exception && (len(got) != 1 || !bytes.Equal(got[0], ip) || drops != 0):
			t.Errorf("%x: exception got %x, %d drops; want the packet unchanged, no drop", ip[:40], got, drops)
		case !c.exception && (len(got) != 0 || drops != 1):
			t.Errorf("%x: %d packets to the exception, %d drops; want none and one drop (B %v)", ip[:40], len(got), drops, r.b.Stats()[0].Drops.List())
		}
	}
}

// TestMappedAddressesAreIPv6: an IPv4-mapped address in an IPv6 header is
// an IPv6 address to the allowed IPs, as to the kernel's WireGuard: an
// IPv6 packet to ::ffff:198.19.2.10 has no route where only 198.19.2.0/24
// is allowed, and one from ::ffff:198.19.1.10 out of a tunnel whose peer
// is allowed 198.19.1.0/24 (and no IPv6 prefix holding it) is dropped.
func TestMappedAddressesAreIPv6(t *testing.T) {
	r := newRig(t, rigConfig{})
	d0 := TotalDrops(r.a.Stats())
	ip := ip6{src: pA6, dst: "::ffff:" + pB}.bytes()
	sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), ip)})
	r.a.workers[0].outbound(r.clock.Now())
	if d := TotalDrops(r.a.Stats()); d[DropNoRoute] != d0[DropNoRoute]+1 {
		t.Errorf("to ::ffff:%s: drops %v, want one no_route", pB, d.List())
	}
	drainPort(r.wanB)
	d0 = TotalDrops(r.b.Stats())
	sealToB(t, r, ip6{src: "::ffff:" + pA, dst: pB6}.bytes())
	r.b.workers[0].inbound(r.clock.Now())
	if d := TotalDrops(r.b.Stats()); d[DropAllowedIPs] != d0[DropAllowedIPs]+1 || len(drainPort(r.hostB)) != 0 {
		t.Errorf("from ::ffff:%s: drops %v, want one allowed_ips", pA, d.List())
	}
}

// TestOwnSourceIsMartian: an IPv4 packet whose source is one of the
// gateway's own addresses (a tunnel address, a host address) is dropped
// (martian) from the LAN and from the tunnel, as Linux drops a packet it
// receives from one of its own addresses (Linux 6.18: dropped both ways
// in the reference router), and not passed on as the gateway's; IPv6 is
// not judged so, as on Linux.
func TestOwnSourceIsMartian(t *testing.T) {
	const tun4 = "198.19.100.1"
	var exc [][]byte
	r := newRig(t, rigConfig{
		tunnelAddrs: []netip.Addr{netip.MustParseAddr(tun4)},
		hostAddrsB:  []netip.Addr{lanAddrB, lan6B},
		exception:   func(p []byte) { exc = append(exc, bytes.Clone(p)) },
	})
	allowAll(t, r)
	// Into the tunnel at A, from A's tunnel address.
	for _, c := range []struct {
		pkt packetBuilder
		fwd bool
	}{
		{ip4{src: tun4, dst: pB}, false},
		{ip4{src: pA, dst: pB}, true},
	} {
		before := r.a.Stats()[0]
		sendAll(t, r.hostA, 0, []dataplane.Frame{ipFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), c.pkt.bytes())})
		r.a.workers[0].outbound(r.clock.Now())
		after := r.a.Stats()[0]
		drainPort(r.wanB)
		fwd := after.Encrypted == before.Encrypted+1
		if fwd != c.fwd || !fwd && after.Drops[DropMartian] != before.Drops[DropMartian]+1 {
			t.Errorf("into the tunnel %x: forwarded %v, drops %v; want forwarded %v, else one martian", c.pkt.bytes()[12:20], fwd, after.Drops.List(), c.fwd)
		}
	}
	// Out of the tunnel at B, from B's LAN address.
	for _, c := range []struct {
		pkt packetBuilder
		fwd bool
	}{
		{ip4{src: lanAddrB.String(), dst: pB}, false},
		{ip4{src: tun4, dst: pB}, false},
		{ip6{src: lan6B.String(), dst: pB6}, true},
	} {
		before := r.b.Stats()[0]
		sealToB(t, r, c.pkt.bytes())
		r.b.workers[0].inbound(r.clock.Now())
		after := r.b.Stats()[0]
		fwd := len(drainPort(r.hostB)) == 1
		if fwd != c.fwd || !fwd && after.Drops[DropMartian] != before.Drops[DropMartian]+1 {
			t.Errorf("out of the tunnel %x: forwarded %v, drops %v; want forwarded %v, else one martian", c.pkt.bytes()[:20], fwd, after.Drops.List(), c.fwd)
		}
	}
}

// FuzzTransitChecks: the address and option checks of transit packets
// (transitAddrs, headerOptions, and optionsError, the parameter problem
// of a drop) never read past a packet whose header ParseL3 accepted,
// whatever its options; optionsError answers only what headerOptions
// drops, pointing into the options (IPv4) or the hop-by-hop header
// (IPv6), and its answer can be built. Seeds: a source route, a
// timestamp, an option running past the header, IPv6 hop-by-hop options
// to skip and to discard, a hop-by-hop header longer than the packet, a
// PadN too long, a CALIPSO option.
func FuzzTransitChecks(f *testing.F) {
	f.Add(ip4{src: pA, dst: pB, opts: sourceRoute(0x83, pB)}.bytes())
	f.Add(ip4{src: pA, dst: pB, opts: []byte{0x44, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}}.bytes())
	f.Add(ip4{src: pA, dst: pB, opts: []byte{7, 40, 4, 0}}.bytes())
	f.Add(ip6{src: pA6, dst: pB6, ext: hbhUnknown(0x1e)}.bytes())
	f.Add(ip6{src: "fe80::1", dst: "ff02::1", ext: hbhUnknown(0x9e)}.bytes())
	f.Add(ip6{src: pA6, dst: pB6, ext: []byte{0, header.ProtoUDP, 200, 0, 0, 0, 0, 0, 0}}.bytes())
	f.Add(ip6{src: pA6, dst: pB6, ext: []byte{0, header.ProtoUDP, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}.bytes())
	f.Add(ip6{src: pA6, dst: pB6, ext: []byte{0, header.ProtoUDP, 1, 7, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}.bytes())
	f.Fuzz(func(t *testing.T, p []byte) {
		var pkt header.Packet
		if header.ParseL3(p, &pkt) != header.OK {
			return
		}
		ip := p[:pkt.L3End]
		if why, ok := transitAddrs(ip); !ok && why != DropMartian && why != DropMulticast {
			t.Fatalf("transitAddrs = %v", why)
		}
		if optionsPlain(ip) {
			return
		}
		why, ok := headerOptions(ip)
		if !ok && why != DropIPOptions {
			t.Fatalf("headerOptions = %v", why)
		}
		e, answer := optionsError(ip)
		if !answer {
			return
		}
		end := header.IPv6Len + int(header.IPv6(ip).PayloadLength())
		if ip[0]>>4 == header.IPv4Version {
			end = header.IPv4(ip).HeaderLen()
		}
		if ok || e.kind != icmpParamProblem || e.ptr < header.IPv4MinLen || int(e.ptr) >= end {
			t.Fatalf("optionsError = %+v for a packet headerOptions forwards %v (options end at %d)", e, ok, end)
		}
		var b [header.ICMPv6ErrorMaxLen]byte
		src := lan6A
		if ip[0]>>4 == header.IPv4Version {
			src = lanAddrA
		}
		if _, r := putICMPError(b[:], src, ip, e); r != header.OK && r != header.ReasonICMPNotAllowed {
			t.Fatalf("putICMPError = %v", r)
		}
	})
}
