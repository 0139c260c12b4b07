package dataplanetest

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
)

// Layout of the suite's frames (IEEE 802.3, RFC 791, RFC 768).
const (
	ethLen  = 14
	ipv4Len = 20
	udpLen  = 8
	hdrLen  = ethLen + ipv4Len + udpLen // 42

	// The payload: magic, direction, flow, sequence number.
	magic      = 0x7767_7069_6f64_7074 // "wgpiodpt"
	payloadLen = 8 + 1 + 2 + 8
	minFrame   = hdrLen + payloadLen // 61

	dirAB = 1 // a to b
	dirBA = 2 // b to a
)

// endpoint is one end of the suite's flows.
type endpoint struct {
	mac  net.HardwareAddr
	ip   netip.Addr
	port uint16 // first UDP port; flow f uses port+f
}

// tag says what a frame is: its direction, flow and sequence number.
type tag struct {
	dir  uint8
	flow uint16
	seq  uint64
}

// build writes a frame of size bytes (at least minFrame) from src to dst
// into f, which must be empty with room for it.
func build(f *dataplane.Frame, size int, src, dst endpoint, tg tag) bool {
	size = max(size, minFrame)
	if !f.SetLen(size) {
		return false
	}
	b := f.Data()
	copy(b[0:6], dst.mac)
	copy(b[6:12], src.mac)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[ethLen:]
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:], uint16(size-ethLen))
	binary.BigEndian.PutUint16(ip[4:], uint16(tg.seq)) // identification
	binary.BigEndian.PutUint16(ip[6:], 0x4000)         // DF, offset 0
	ip[8] = 64
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	s4, d4 := src.ip.As4(), dst.ip.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:ipv4Len]))
	udp := ip[ipv4Len:]
	binary.BigEndian.PutUint16(udp[0:], src.port+tg.flow)
	binary.BigEndian.PutUint16(udp[2:], dst.port+tg.flow)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-ethLen-ipv4Len))
	binary.BigEndian.PutUint16(udp[6:], 0)
	p := udp[udpLen:]
	binary.BigEndian.PutUint64(p[0:], magic)
	p[8] = tg.dir
	binary.BigEndian.PutUint16(p[9:], tg.flow)
	binary.BigEndian.PutUint64(p[11:], tg.seq)
	for i := payloadLen; i < len(p); i++ {
		p[i] = byte(tg.seq) + byte(i)
	}
	return true
}

// parse checks a frame the suite built for dst and returns its tag; ok is
// false if anything is off.
func parse(b []byte, dst endpoint) (tg tag, ok bool) {
	if len(b) < minFrame || !equalMAC(b[0:6], dst.mac) || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		return tag{}, false
	}
	ip := b[ethLen:]
	if ip[0] != 0x45 || ip[9] != 17 || ipChecksum(ip[:ipv4Len]) != 0 ||
		int(binary.BigEndian.Uint16(ip[2:])) != len(b)-ethLen {
		return tag{}, false
	}
	d4 := dst.ip.As4()
	if !equalMAC(ip[16:20], d4[:]) {
		return tag{}, false
	}
	p := ip[ipv4Len+udpLen:]
	if binary.BigEndian.Uint64(p) != magic {
		return tag{}, false
	}
	tg = tag{dir: p[8], flow: binary.BigEndian.Uint16(p[9:]), seq: binary.BigEndian.Uint64(p[11:])}
	if binary.BigEndian.Uint16(ip[ipv4Len+2:]) != dst.port+tg.flow {
		return tag{}, false
	}
	for i := payloadLen; i < len(p); i++ {
		if p[i] != byte(tg.seq)+byte(i) {
			return tag{}, false
		}
	}
	return tg, true
}

// reflect turns a frame built for dst around, in place: MACs, IP addresses
// and UDP ports swapped, direction flipped. Checksums stay valid.
func reflect(b []byte) {
	var mac [6]byte
	copy(mac[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], mac[:])
	ip := b[ethLen:]
	var a [4]byte
	copy(a[:], ip[12:16])
	copy(ip[12:16], ip[16:20])
	copy(ip[16:20], a[:])
	udp := ip[ipv4Len:]
	sp, dp := binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[2:])
	binary.BigEndian.PutUint16(udp[0:], dp)
	binary.BigEndian.PutUint16(udp[2:], sp)
	p := udp[udpLen:]
	p[8] = 3 - p[8]
}

func equalMAC(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ipChecksum is the Internet checksum (RFC 1071) of b; 0 over a header
// that carries its correct checksum.
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
