package memport

import (
	"encoding/binary"
	"math/bits"
)

// Header constants used by the RSS hash (IEEE 802.3, IEEE 802.1Q, RFC 791,
// RFC 8200).
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100 // 802.1Q C-tag
	etherTypeQinQ = 0x88a8 // 802.1ad S-tag
	ipv4MinLen    = 20
	ipv6HeaderLen = 40
	protoTCP      = 6
	protoUDP      = 17
)

// RSSQueue returns the RX queue in [0, queues) that a frame lands on, the way
// a NIC's receive-side scaling picks one (Microsoft, "RSS hashing types";
// Linux Documentation/networking/scaling.rst): a hash of the outer 5-tuple
// scaled to the number of queues.
//
// The hash covers the IPv4 or IPv6 source and destination addresses and, for
// TCP and UDP, the source and destination ports and the protocol. One
// 802.1Q or 802.1ad tag in front of the IP header is skipped. IPv4 fragments
// (MF set or a non-zero fragment offset) and IPv6 packets whose first next
// header is not TCP or UDP (extension headers are not walked) hash on the
// addresses only, so every fragment of a datagram lands on one queue. Non-IP
// frames, runts and truncated headers go to queue 0.
//
// The hash is not Toeplitz: it multiplies the tuple's 64-bit words by odd
// constants independently, combines them and mixes the result, fast and well
// spread, and like a NIC's default it is not
// symmetric (the two directions of a flow may land on different queues).
// RSSQueue does not allocate and never panics.
func RSSQueue(frame []byte, queues int) int {
	if queues <= 1 {
		return 0
	}
	h, ok := rssHash(frame)
	if !ok {
		return 0
	}
	// Lemire's multiply-shift maps a 32-bit hash onto [0, queues) without
	// a division.
	return int((uint64(h) * uint64(queues)) >> 32)
}

// Odd 64-bit multipliers: the golden-ratio constant and MurmurHash3's
// fmix64 constants.
const (
	mulA = 0x9e3779b97f4a7c15
	mulB = 0xff51afd7ed558ccd
	mulC = 0xc4ceb9fe1a85ec53
)

// finish folds the product of the tuple's words into 32 well-mixed bits.
// The words are multiplied independently (no chain of dependent
// multiplies), so the hash costs a few cycles.
func finish(h uint64) uint32 {
	h ^= h >> 33
	h *= mulB
	h ^= h >> 33
	return uint32(h >> 32)
}

// rssHash returns the hash of frame's 5-tuple (or 2-tuple) and whether the
// frame is IP.
func rssHash(b []byte) (uint32, bool) {
	if len(b) < ethHeaderLen {
		return 0, false
	}
	et := binary.BigEndian.Uint16(b[12:])
	off := ethHeaderLen
	if et == etherTypeVLAN || et == etherTypeQinQ {
		if len(b) < ethHeaderLen+vlanTagLen {
			return 0, false
		}
		et = binary.BigEndian.Uint16(b[16:])
		off += vlanTagLen
	}
	ip := b[off:]
	switch et {
	case etherTypeIPv4:
		if len(ip) < ipv4MinLen || ip[0]>>4 != 4 {
			return 0, false
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl < ipv4MinLen || len(ip) < ihl {
			return 0, false
		}
		h := binary.BigEndian.Uint64(ip[12:]) * mulA // source and destination
		proto := ip[9]
		fragment := binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 // MF or offset
		if !fragment && (proto == protoTCP || proto == protoUDP) && len(ip) >= ihl+4 {
			ports := uint64(binary.BigEndian.Uint32(ip[ihl:]))<<8 | uint64(proto)
			h ^= bits.RotateLeft64((ports+1)*mulC, 31)
		}
		return finish(h), true
	case etherTypeIPv6:
		if len(ip) < ipv6HeaderLen || ip[0]>>4 != 6 {
			return 0, false
		}
		h := binary.BigEndian.Uint64(ip[8:])*mulA ^
			bits.RotateLeft64(binary.BigEndian.Uint64(ip[16:])*mulB, 17) ^
			bits.RotateLeft64(binary.BigEndian.Uint64(ip[24:])*mulC, 29) ^
			bits.RotateLeft64(binary.BigEndian.Uint64(ip[32:])*mulA, 43)
		nh := ip[6]
		if (nh == protoTCP || nh == protoUDP) && len(ip) >= ipv6HeaderLen+4 {
			ports := uint64(binary.BigEndian.Uint32(ip[ipv6HeaderLen:]))<<8 | uint64(nh)
			h ^= bits.RotateLeft64((ports+1)*mulC, 31)
		}
		return finish(h), true
	}
	return 0, false
}
