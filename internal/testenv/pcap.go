package testenv

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"testing"
)

// WANLeaks reads a pcap file of Ethernet frames captured on a WAN and
// returns how many frames it read and a line for each IP packet that
// should not be there: one with an address for which inner reports true
// (a site's inner network) as source or destination, or a UDP datagram
// whose payload does not have the shape of a WireGuard message
// (IsWireGuard). WireGuard's outer packets carry the gateways' addresses
// only.
func WANLeaks(t testing.TB, file string, inner func(netip.Addr) bool) (frames int, leaks []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("%s: not a little-endian Ethernet pcap file", file)
	}
	for off := 24; off+16 <= len(b); {
		caplen := int(binary.LittleEndian.Uint32(b[off+8:]))
		if off+16+caplen > len(b) {
			break
		}
		f := b[off+16 : off+16+caplen]
		off += 16 + caplen
		frames++
		if len(f) < 14 {
			continue
		}
		var src, dst netip.Addr
		var proto int
		var l4 []byte
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0800:
			ip := f[14:]
			if len(ip) < 20 {
				continue
			}
			ihl := int(ip[0]&15) * 4
			src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
			proto, l4 = int(ip[9]), ip[min(ihl, len(ip)):]
		case 0x86dd:
			ip := f[14:]
			if len(ip) < 40 {
				continue
			}
			src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
			proto, l4 = int(ip[6]), ip[40:]
		default:
			continue
		}
		where := fmt.Sprintf("frame %d %v → %v proto %d", frames, src, dst, proto)
		if inner(src) || inner(dst) {
			leaks = append(leaks, where+": inner address on the WAN")
			continue
		}
		if proto != 17 || len(l4) < 8 {
			continue
		}
		if msg := l4[8:]; !IsWireGuard(msg) {
			leaks = append(leaks, fmt.Sprintf("%s: UDP %d → %d payload of %d bytes is not a WireGuard message", where,
				binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), len(msg)))
		}
	}
	return frames, leaks
}

// IsWireGuard reports whether msg has the shape of a WireGuard message
// (whitepaper §5.4: type, three zero bytes, the type's length).
func IsWireGuard(msg []byte) bool {
	if len(msg) < 4 || msg[1] != 0 || msg[2] != 0 || msg[3] != 0 {
		return false
	}
	switch msg[0] {
	case 1:
		return len(msg) == 148
	case 2:
		return len(msg) == 92
	case 3:
		return len(msg) == 64
	case 4:
		return len(msg) >= 32 && (len(msg)-32)%16 == 0
	}
	return false
}
