package tundev

import (
	"bytes"
	"encoding/binary"

	"github.com/wgpio/wgpio/header"
)

// What Linux's GRO checks that wireguard-go's does not. wireguard-go's
// GRO (OffloadTUN's writers) coalesces the segments of a TCP or UDP flow
// whose sequence numbers (TCP) follow each other, whatever their IPv4
// identifications and IPv6 flow labels, and coalesces a segment in front
// of an earlier one (TCP); the kernel segments the large packet again with
// the first segment's header, its identification counted up by one a
// segment. Linux's GRO, which a router with wg0 runs over what it
// decrypts, coalesces only segments whose identifications follow each
// other (or, with DF, stay the same, which the segmentation of a packet
// from a TUN counts up all the same), of one flow label, in order
// (inet_gro_flush, ipv6_gro_receive, tcp_gro_receive). So WriteBatch
// writes a flow's segment that does not follow the one before it (its
// identification not one more, another flow label, its sequence number
// not the end of the one before) in a write of its own from there on: of
// what wireguard-go coalesces, the kernel hands on each segment as it was
// written.

// groMeta is what follows keeps of a staged packet that wireguard-go's
// GRO may coalesce (a candidate: a TCP segment of ACK or ACK|PSH alone,
// or a UDP datagram, with a payload, not a fragment, its length field its
// length; IPv4 without options; IPv6 without extension headers): hash 0
// for any other packet.
type groMeta struct {
	hash uint32 // of the flow (protocol, addresses, ports); 0: not a candidate
	id   uint32 // IPv4 identification, IPv6 flow label
	seq  uint32 // TCP: sequence number
	end  uint32 // TCP: sequence number + payload length
}

// groMetaOf returns p's groMeta (p at least 1 byte): the candidates as
// wireguard-go's packetIsGROCandidate, tcpGRO and udpGRO take them.
func groMetaOf(p []byte) groMeta {
	if len(p) < header.IPv4MinLen+header.UDPLen {
		return groMeta{}
	}
	var m groMeta
	var iph int
	var proto byte
	switch p[0] >> 4 {
	case header.IPv4Version:
		iph, proto = header.IPv4MinLen, p[9]
		if p[0]&0xf != 5 || int(binary.BigEndian.Uint16(p[2:4])) != len(p) ||
			p[6]&0x3f != 0 || p[7] != 0 { // MF or an offset: a fragment
			return groMeta{}
		}
		m.id = uint32(binary.BigEndian.Uint16(p[4:6]))
	case header.IPv6Version:
		iph, proto = header.IPv6Len, p[6]
		if len(p) < header.IPv6Len+header.UDPLen || int(binary.BigEndian.Uint16(p[4:6])) != len(p)-header.IPv6Len {
			return groMeta{}
		}
		m.id = binary.BigEndian.Uint32(p[0:4]) & 0xfffff
	default:
		return groMeta{}
	}
	switch proto {
	case header.ProtoTCP:
		if len(p) < iph+20 {
			return groMeta{}
		}
		thl := int(p[iph+12]>>4) * 4
		if thl < 20 || len(p) <= iph+thl {
			return groMeta{}
		}
		if f := p[iph+13]; f != 0x10 && f != 0x18 { // ACK, ACK|PSH
			return groMeta{}
		}
		m.seq = binary.BigEndian.Uint32(p[iph+4 : iph+8])
		m.end = m.seq + uint32(len(p)-iph-thl)
	case header.ProtoUDP:
		if len(p) <= iph+header.UDPLen {
			return groMeta{}
		}
	default:
		return groMeta{}
	}
	// The ports and the 8 bytes before them (IPv4: both addresses; IPv6:
	// the destination's last ones); follows compares the rest.
	h := uint32(proto)<<24 ^ binary.BigEndian.Uint32(p[iph:iph+4])
	h ^= binary.BigEndian.Uint32(p[iph-8:iph-4]) * 0x9e3779b1
	h ^= binary.BigEndian.Uint32(p[iph-4:iph]) * 0x85ebca77
	m.hash = h | 1
	return m
}

// follows reports whether p, of groMeta m, may go in one wireguard-go
// Write with w's first k staged packets: it is no candidate, no staged
// candidate is of its flow, or it follows the last that is as Linux's GRO
// would take it (its IPv4 identification one more, its IPv6 flow label the
// same, its TCP sequence number the end of that one's). A scan of the k
// staged packets' hashes at most; no allocation.
func (w *offloadWriter) follows(k int, p []byte, m groMeta) bool {
	if m.hash == 0 {
		return true
	}
	for j := k - 1; j >= 0; j-- {
		prev := &w.meta[j]
		if prev.hash != m.hash || !sameFlow(w.batch[j][offloadHeadroom:], p) {
			continue
		}
		if p[0]>>4 == header.IPv4Version {
			if m.id != (prev.id+1)&0xffff {
				return false
			}
		} else if m.id != prev.id {
			return false
		}
		return m.seq == prev.end
	}
	return true
}

// sameFlow reports whether candidates a and b (groMetaOf) are of one
// flow: IP version, protocol, addresses and ports.
func sameFlow(a, b []byte) bool {
	if a[0]>>4 != b[0]>>4 {
		return false
	}
	if a[0]>>4 == header.IPv4Version {
		return a[9] == b[9] && bytes.Equal(a[12:24], b[12:24])
	}
	return a[6] == b[6] && bytes.Equal(a[8:44], b[8:44])
}
