package header_test

import (
	"fmt"
	"net/netip"

	"github.com/wgpio/wgpio/header"
)

// Build a UDP/IPv4 frame in place, parse it back, and verify its checksums.
func Example() {
	frame := make([]byte, 64)
	payload := []byte("hello")
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")

	n := header.PutEthernet(frame, header.MAC{2, 0, 0, 0, 0, 2}, header.MAC{2, 0, 0, 0, 0, 1}, header.EtherTypeIPv4)
	ip := header.IPv4Fields{Protocol: header.ProtoUDP, DontFragment: true, Src: src.As4(), Dst: dst.As4()}
	n += header.PutIPv4(frame[n:], &ip, header.UDPLen+len(payload))
	udp := header.UDP(frame[n:])
	n += header.PutUDP(udp, 51820, 51820, len(payload))
	n += copy(frame[n:], payload)
	udp.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, udp.Length()))
	// frame[n:] is Ethernet padding up to 64 bytes: Parse ignores it.

	var p header.Packet
	if r := header.Parse(frame, &p); r != header.OK {
		fmt.Println("drop:", r)
		return
	}
	u := header.UDP(frame[p.L4Off:p.L3End])
	fmt.Println(p.Src, p.Dst, p.DstPort, string(frame[p.PayloadOff:p.PayloadOff+p.PayloadLen]))
	fmt.Println(u.VerifyChecksum(header.PseudoHeaderChecksum(p.Proto, p.Src, p.Dst, u.Length())))
	fmt.Println(header.Parse(frame[:20], &p))
	// Output:
	// 198.18.0.1 198.18.0.2 51820 hello
	// true
	// truncated IP header
}
