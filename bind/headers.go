package bind

import (
	"encoding/binary"
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// Header sizes of the datagrams sent.
const (
	hdr4 = header.EthernetLen + header.IPv4MinLen + header.UDPLen // 42
	hdr6 = header.EthernetLen + header.IPv6Len + header.UDPLen    // 62
)

// hdrTemplate is the Ethernet, IP and UDP headers of a batch's datagrams,
// built once per batch (they differ only in lengths and checksums): per
// datagram, build copies it and sets those.
type hdrTemplate struct {
	b   [hdr6]byte
	n   int    // hdr4 or hdr6
	v4  bool   // IPv4 (else IPv6)
	sum uint32 // IPv4: partial checksum of the IP header with total length 0; IPv6: of the pseudo-header with length 0
	ps  uint32 // IPv4 with Config.ChecksumIPv4: the pseudo-header's, length 0
	udp bool   // IPv4: fill the UDP checksum (Config.ChecksumIPv4)
	mtu int    // the port's MTU, read once per batch
}

// template builds the headers of datagrams to dst from src via mac, with
// zero lengths and checksums.
func (b *Bind) template(mac header.MAC, src netip.Addr, dst netip.AddrPort, v4 bool) hdrTemplate {
	var t hdrTemplate
	d := t.b[:]
	if v4 {
		t.n, t.v4, t.udp = hdr4, true, b.cfg.ChecksumIPv4
		header.PutEthernet(d, mac, b.mac, header.EtherTypeIPv4)
		// DF clear, as the kernel's WireGuard sends its outer packets
		// (and the fast path): a router on the way with a smaller MTU
		// fragments them, where with DF it would drop them and send
		// "fragmentation needed" to an address no socket listens on
		// for it (the kernel's, beside the AF_XDP port): the tunnel's
		// large packets would be lost without a count.
		fl := header.IPv4Fields{TTL: b.cfg.TTL, Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.Addr().As4()}
		ip := d[header.EthernetLen:]
		header.PutIPv4(ip, &fl, -header.IPv4MinLen) // total length 0
		ip[10], ip[11] = 0, 0
		// Sums are kept folded to 16 bits, so that adding a length
		// cannot overflow.
		t.sum = uint32(header.FoldChecksum(header.Checksum(ip[:header.IPv4MinLen], 0)))
		header.PutUDP(d[header.EthernetLen+header.IPv4MinLen:], uint16(b.port.Load()), dst.Port(), -header.UDPLen)
		if t.udp {
			t.ps = uint32(header.FoldChecksum(header.PseudoHeaderChecksumBytes(header.ProtoUDP, fl.Src[:], fl.Dst[:], 0)))
		}
		return t
	}
	t.n = hdr6
	header.PutEthernet(d, mac, b.mac, header.EtherTypeIPv6)
	fl := header.IPv6Fields{NextHeader: header.ProtoUDP, HopLimit: b.cfg.TTL, Src: src.As16(), Dst: dst.Addr().As16()}
	header.PutIPv6(d[header.EthernetLen:], &fl, 0)
	header.PutUDP(d[header.EthernetLen+header.IPv6Len:], uint16(b.port.Load()), dst.Port(), -header.UDPLen)
	t.sum = uint32(header.FoldChecksum(header.PseudoHeaderChecksumBytes(header.ProtoUDP, fl.Src[:], fl.Dst[:], 0)))
	return t
}

// build writes payload and the template's headers, with this datagram's
// lengths, checksums and IPv4 identification id, into f (an empty frame).
// It returns false if the datagram does not fit the frame or is longer
// than UDP can carry (an IPv4 total length, or an IPv6 payload length
// and a UDP length, up to 65,535 bytes: RFC 791 §3.1, RFC 8200 §3, RFC
// 768). It does not look at the MTU: sendBatch sends a datagram longer as
// fragments.
func (b *Bind) build(f *dataplane.Frame, payload []byte, t *hdrTemplate, id uint16) bool {
	if len(payload) > maxPayload(t.v4) || !f.SetLen(len(payload)) {
		return false
	}
	copy(f.Data(), payload)
	d := f.Prepend(t.n)
	if d == nil {
		return false
	}
	copy(d, t.b[:t.n])
	ulen := header.UDPLen + len(payload)
	if t.v4 {
		ip := d[header.EthernetLen:]
		total := header.IPv4MinLen + ulen
		binary.BigEndian.PutUint16(ip[2:4], uint16(total))
		binary.BigEndian.PutUint16(ip[4:6], id)
		binary.BigEndian.PutUint16(ip[10:12], ^header.FoldChecksum(t.sum+uint32(total)+uint32(id)))
		u := header.UDP(ip[header.IPv4MinLen:])
		binary.BigEndian.PutUint16(u[4:6], uint16(ulen))
		if t.udp {
			u.SetChecksum(t.ps + uint32(ulen))
		}
		return true
	}
	binary.BigEndian.PutUint16(d[header.EthernetLen+4:], uint16(ulen)) // IPv6 payload length
	u := header.UDP(d[header.EthernetLen+header.IPv6Len:])
	binary.BigEndian.PutUint16(u[4:6], uint16(ulen))
	u.SetChecksum(t.sum + uint32(ulen))
	return true
}

// maxPayload is the longest UDP payload in one datagram over IPv4 (v4)
// or IPv6 without jumbograms: 65,507 and 65,527 bytes.
func maxPayload(v4 bool) int {
	if v4 {
		return 0xffff - header.IPv4MinLen - header.UDPLen
	}
	return 0xffff - header.UDPLen
}
