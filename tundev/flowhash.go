package tundev

import (
	"encoding/binary"
	"math/bits"

	"github.com/wgpio/wgpio/header"
)

// FlowHash hashes an IP packet's flow (addresses, protocol, and the first
// four bytes of the transport header for TCP and UDP when unfragmented), for
// spreading packets over queues without reordering a flow. It multiplies the
// tuple's 64-bit words by odd constants and mixes the result (a few cycles,
// not a loop per byte); anything but IPv4 and IPv6 hashes to 0.
func FlowHash(p []byte) uint32 {
	const (
		mulA = 0x9e3779b97f4a7c15 // the golden ratio's and MurmurHash3's fmix64 constants
		mulB = 0xff51afd7ed558ccd
		mulC = 0xc4ceb9fe1a85ec53
	)
	var h, x uint64
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		h = binary.BigEndian.Uint64(p[12:20]) * mulA
		x = uint64(p[9])
		ihl := int(p[0]&0x0f) * 4
		if (p[9] == header.ProtoTCP || p[9] == header.ProtoUDP) && binary.BigEndian.Uint16(p[6:8])&0x3fff == 0 &&
			ihl >= 20 && len(p) >= ihl+4 {
			x |= uint64(binary.BigEndian.Uint32(p[ihl:])) << 8
		}
	case len(p) >= 40 && p[0]>>4 == 6:
		h = binary.BigEndian.Uint64(p[8:])*mulA ^
			bits.RotateLeft64(binary.BigEndian.Uint64(p[16:])*mulB, 17) ^
			bits.RotateLeft64(binary.BigEndian.Uint64(p[24:])*mulC, 29) ^
			bits.RotateLeft64(binary.BigEndian.Uint64(p[32:])*mulA, 43)
		x = uint64(p[6])
		if (p[6] == header.ProtoTCP || p[6] == header.ProtoUDP) && len(p) >= 44 {
			x |= uint64(binary.BigEndian.Uint32(p[40:])) << 8
		}
	default:
		return 0
	}
	h ^= bits.RotateLeft64((x+1)*mulC, 31)
	h ^= h >> 33
	h *= mulB
	h ^= h >> 33
	return uint32(h >> 32)
}
