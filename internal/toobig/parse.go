package toobig

import (
	"encoding/binary"
	"net/netip"

	"github.com/wgpio/wgpio/header"
)

// icmpv6HeaderLen is the length of an ICMPv6 error's header, type to the
// MTU (RFC 4443 §3.2), before the quoted packet.
const icmpv6HeaderLen = 8

// TooBig is what a "packet too big" says about the outer packet it quotes.
type TooBig struct {
	// Src and Dst are the quoted packet's addresses: ours and the
	// endpoint's.
	Src, Dst netip.Addr
	// SrcPort is its UDP source port.
	SrcPort uint16
	// MTU is the MTU the error reports (held to 65,535).
	MTU int
}

// Parse reads msg, an ICMPv6 message (type first), as a "packet too big"
// (RFC 4443 §3.2) quoting a UDP packet, whole or a first fragment (RFC
// 8200 §4.5). ok is false for anything else. It does not check the
// message's checksum (the raw socket's kernel does; ListenLink's reader
// does).
func Parse(msg []byte) (tb TooBig, ok bool) {
	const quote = icmpv6HeaderLen + header.IPv6Len
	if len(msg) < quote+header.UDPLen || msg[0] != 2 || msg[1] != 0 || msg[8]>>4 != header.IPv6Version {
		return tb, false
	}
	q := msg[icmpv6HeaderLen:]
	nh, l4 := q[6], q[header.IPv6Len:]
	if nh == header.ProtoFragment {
		if len(l4) < header.IPv6FragmentLen+header.UDPLen || binary.BigEndian.Uint16(l4[2:4])&^7 != 0 {
			return tb, false
		}
		nh, l4 = l4[0], l4[header.IPv6FragmentLen:]
	}
	if nh != header.ProtoUDP {
		return tb, false
	}
	return TooBig{
		Src:     netip.AddrFrom16([16]byte(q[8:24])),
		Dst:     netip.AddrFrom16([16]byte(q[24:40])),
		SrcPort: binary.BigEndian.Uint16(l4[0:2]),
		MTU:     int(min(binary.BigEndian.Uint32(msg[4:8]), 65535)),
	}, true
}
