package fastpath

import (
	"encoding/binary"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// VLANs (IEEE 802.1Q §9.6). Each port belongs to one VLAN, Config.LANVLAN
// or Config.WANVLAN, 0 meaning untagged: a worker takes from a port only
// frames of its VLAN, and every frame it sends there carries the VLAN's
// tag. With 0, a priority tag (an 802.1Q tag with VID 0) counts as
// untagged, as Linux treats it.

// foreignVLAN reports whether a frame Parse read into p is of another
// VLAN than vlan: its VID differs (an untagged frame has VID 0), or it
// carries an 802.1ad tag or a second tag, which the gateway never
// takes.
func foreignVLAN(p *header.Packet, vlan uint16) bool {
	return p.VLANID != vlan || p.EtherType == header.EtherTypeVLAN || p.EtherType == header.EtherTypeQinQ
}

// l2Len is the Ethernet header length of the frames a worker sends on a
// port of vlan: 14, or 18 with the tag.
func l2Len(vlan uint16) int {
	if vlan != 0 {
		return header.EthernetVLANLen
	}
	return header.EthernetLen
}

// putEthernet writes an Ethernet header for a frame on a port of vlan
// (tagged when vlan is not 0) into b and returns its length.
func putEthernet(b []byte, dst, src header.MAC, vlan, etherType uint16) int {
	if vlan != 0 {
		return header.PutEthernetVLAN(b, dst, src, vlan, etherType)
	}
	return header.PutEthernet(b, dst, src, etherType)
}

// putLANEthernet prepends the Ethernet header toward dst on the LAN (with
// the LAN's tag) to f and returns its length.
func (w *worker) putLANEthernet(f *dataplane.Frame, dst [6]byte, etherType uint16) int {
	n := w.lanL2
	putEthernet(f.Prepend(n), header.MAC(dst), header.MAC(w.lanMAC), w.lanVLAN, etherType)
	return n
}

// neighbourL2 returns the Ethernet header length (14, or 18 with a tag) of
// an ARP frame or an ICMPv6 neighbour solicitation or advertisement
// without extension headers on a port of vlan, or, where vlan is not 0,
// an MLD query, or 0 for any other frame (another VLAN's included).
func neighbourL2(d []byte, vlan uint16) int {
	l2 := header.EthernetLen
	if len(d) >= header.EthernetVLANLen && binary.BigEndian.Uint16(d[12:14]) == header.EtherTypeVLAN {
		if binary.BigEndian.Uint16(d[14:16])&header.VLANIDMask != vlan {
			return 0
		}
		l2 = header.EthernetVLANLen
	} else if vlan != 0 || len(d) < header.EthernetLen {
		return 0
	}
	switch binary.BigEndian.Uint16(d[l2-2 : l2]) {
	case header.EtherTypeARP:
		return l2
	case header.EtherTypeIPv6:
		icmp := l2 + header.IPv6Len
		if len(d) > icmp && d[l2+6] == header.ProtoICMPv6 &&
			(d[icmp] == ndpNeighbourSolicitation || d[icmp] == ndpNeighbourAdvertisement) {
			return l2
		}
		// On a VLAN, MLD queries too: the kernel, with no VLAN device,
		// cannot answer them, and the handler's arp.MLDHost does.
		if vlan != 0 && len(d) > icmp+mldHBHLen && d[l2+6] == 0 && d[icmp] == header.ProtoICMPv6 &&
			d[icmp+1] == 0 && d[icmp+mldHBHLen] == mldQuery {
			return l2
		}
	}
	return 0
}

// An MLD query (RFC 3810 §5.1) as queriers send it: behind an 8-byte
// Hop-by-Hop Options header (next header 0) holding the Router Alert.
const (
	mldHBHLen = 8
	mldQuery  = 130
)

// tagFrame inserts an 802.1Q tag of vlan after the MAC addresses of the
// untagged frame in f, which grows by 4 bytes; it reports false (f
// unchanged) when f has no room.
func tagFrame(f *dataplane.Frame, vlan uint16) bool {
	n := f.Len()
	if n < header.EthernetLen || !f.SetLen(n+header.VLANTagLen) {
		return false
	}
	d := f.Data()
	copy(d[header.EthernetVLANLen-2:], d[header.EthernetLen-2:n])
	binary.BigEndian.PutUint16(d[12:14], header.EtherTypeVLAN)
	binary.BigEndian.PutUint16(d[14:16], vlan&header.VLANIDMask)
	return true
}
