package header

import (
	"encoding/binary"
	"net/netip"
)

// Ethernet II and IEEE 802.1Q sizes and EtherTypes (IEEE 802.3 §3.2,
// IEEE 802.1Q §9.6; EtherType values from the IEEE registry).
const (
	MACLen          = 6  // bytes in a MAC address
	EthernetLen     = 14 // destination, source, EtherType
	VLANTagLen      = 4  // TPID 0x8100 and TCI
	EthernetVLANLen = EthernetLen + VLANTagLen

	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q customer tag (TPID)
	EtherTypeIPv6 = 0x86dd
	// EtherTypeQinQ (IEEE 802.1ad service tag) is not walked: a frame
	// with it reports it as its EtherType.
	EtherTypeQinQ = 0x88a8

	// VLANIDMask selects the 12-bit VLAN identifier in a TCI.
	VLANIDMask = 0x0fff
)

// MAC is an IEEE 802 MAC-48 address. It is comparable and does not allocate.
type MAC [MACLen]byte

// BroadcastMAC is ff:ff:ff:ff:ff:ff.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IsMulticast reports whether the group bit (the least significant bit of
// the first byte, IEEE 802 §8.2) is set; broadcast is multicast too.
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// IsBroadcast reports whether m is ff:ff:ff:ff:ff:ff.
func (m MAC) IsBroadcast() bool { return m == BroadcastMAC }

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

const hexDigits = "0123456789abcdef"

// String formats m as six colon-separated lowercase hex pairs.
func (m MAC) String() string {
	var b [3*MACLen - 1]byte
	for i, x := range m {
		if i > 0 {
			b[3*i-1] = ':'
		}
		b[3*i] = hexDigits[x>>4]
		b[3*i+1] = hexDigits[x&0xf]
	}
	return string(b[:])
}

// MulticastMACIPv6 returns the Ethernet multicast address for the IPv6
// multicast address dst: 33:33 followed by its last four bytes (RFC 2464 §7).
func MulticastMACIPv6(dst netip.Addr) MAC {
	a := dst.As16()
	return MAC{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// Ethernet is a view of an Ethernet II frame starting at the destination
// address. Accessors need len(e) >= EthernetLen, and VLAN accessors need
// len(e) >= EthernetVLANLen when Tagged reports true; Parse checks both.
type Ethernet []byte

// Dst returns the destination MAC address.
func (e Ethernet) Dst() MAC { return MAC(e[0:6]) }

// Src returns the source MAC address.
func (e Ethernet) Src() MAC { return MAC(e[6:12]) }

// Tagged reports whether the frame carries an 802.1Q tag (TPID 0x8100).
func (e Ethernet) Tagged() bool { return binary.BigEndian.Uint16(e[12:14]) == EtherTypeVLAN }

// VLANID returns the 12-bit VLAN identifier of a tagged frame, 0 for an
// untagged one (VID 0 also means "priority tag only", IEEE 802.1Q §9.6).
func (e Ethernet) VLANID() uint16 {
	if !e.Tagged() {
		return 0
	}
	return binary.BigEndian.Uint16(e[14:16]) & VLANIDMask
}

// EtherType returns the EtherType of the payload, after the 802.1Q tag if
// there is one.
func (e Ethernet) EtherType() uint16 {
	if e.Tagged() {
		return binary.BigEndian.Uint16(e[16:18])
	}
	return binary.BigEndian.Uint16(e[12:14])
}

// HeaderLen returns the bytes before the payload: EthernetLen, or
// EthernetVLANLen for a tagged frame.
func (e Ethernet) HeaderLen() int {
	if e.Tagged() {
		return EthernetVLANLen
	}
	return EthernetLen
}

// PutEthernet writes an untagged Ethernet II header into b[:EthernetLen]
// and returns EthernetLen. b must be at least EthernetLen long (a shorter b
// panics, as a slice index does).
func PutEthernet(b []byte, dst, src MAC, etherType uint16) int {
	_ = b[EthernetLen-1]
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:14], etherType)
	return EthernetLen
}

// PutEthernetVLAN writes an Ethernet II header with an 802.1Q tag (PCP and
// DEI zero, VID vlanID&VLANIDMask) into b[:EthernetVLANLen] and returns
// EthernetVLANLen. b must be at least EthernetVLANLen long.
func PutEthernetVLAN(b []byte, dst, src MAC, vlanID, etherType uint16) int {
	_ = b[EthernetVLANLen-1]
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:14], EtherTypeVLAN)
	binary.BigEndian.PutUint16(b[14:16], vlanID&VLANIDMask)
	binary.BigEndian.PutUint16(b[16:18], etherType)
	return EthernetVLANLen
}
