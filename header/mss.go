package header

import "encoding/binary"

// TCP fields the MSS clamp reads (RFC 9293 §3.1, §3.2).
const (
	tcpFlagSYN   = 0x02
	tcpOptEnd    = 0
	tcpOptNOP    = 1
	tcpOptMSS    = 2
	tcpOptMSSLen = 4
)

// ClampMSS lowers the maximum segment size option of a TCP SYN (or SYN-ACK)
// in the IP packet p to mss when it is larger, with an incremental TCP
// checksum update (RFC 1624), and reports whether it changed p. It is what
// routers do for paths that filter ICMP (iptables TCPMSS, RFC 4459 §3.2):
// the hosts then never send segments larger than the tunnel carries.
//
// p is an IPv4 or IPv6 packet (by its version nibble) whose IP header was
// checked (Parse, ParseIP, ParseL3). Anything else is left alone: not TCP,
// a fragment, no SYN flag, no MSS option, a truncated or malformed option
// list. For a tunnel MTU m the MSS to clamp to is m − 40 over IPv4 and
// m − 60 over IPv6 (MSSForMTU). It allocates nothing.
func ClampMSS(p []byte, mss uint16) bool {
	var tcp []byte
	if p[0]>>4 == IPv4Version {
		h := IPv4(p)
		if h.Protocol() != ProtoTCP || h.IsFragment() {
			return false
		}
		hl, total := h.HeaderLen(), min(h.TotalLength(), len(p))
		if total < hl {
			return false
		}
		tcp = p[hl:total]
	} else {
		if len(p) < IPv6Len {
			return false
		}
		end := min(IPv6Len+IPv6(p).PayloadLength(), len(p))
		nh, off := p[6], 0
		if nh != ProtoTCP {
			var frag bool
			var r Reason
			nh, off, frag, r = UpperLayer(p[IPv6Len:end], nh)
			if r != OK || frag || nh != ProtoTCP {
				return false
			}
		}
		tcp = p[IPv6Len+off : end]
	}
	if len(tcp) < TCPMinLen || tcp[13]&tcpFlagSYN == 0 {
		return false
	}
	doff := int(tcp[12]>>4) * 4
	if doff < TCPMinLen || doff > len(tcp) {
		return false
	}
	for o := TCPMinLen; o < doff; {
		switch tcp[o] {
		case tcpOptEnd:
			return false
		case tcpOptNOP:
			o++
			continue
		}
		if o+1 >= doff {
			return false
		}
		l := int(tcp[o+1])
		if l < 2 || o+l > doff {
			return false
		}
		if tcp[o] == tcpOptMSS && l == tcpOptMSSLen {
			// The option's offset in the TCP header may be odd: update
			// the checksum over the aligned words that hold it.
			old := binary.BigEndian.Uint16(tcp[o+2 : o+4])
			if old <= mss {
				return false
			}
			// (an odd start is within the header: doff is a multiple
			// of 4).
			a, e := (o+2)&^1, (o+5)&^1
			var before [4]byte
			copy(before[:], tcp[a:e])
			binary.BigEndian.PutUint16(tcp[o+2:o+4], mss)
			ck := binary.BigEndian.Uint16(tcp[16:18])
			binary.BigEndian.PutUint16(tcp[16:18], UpdateChecksumBytes(ck, before[:e-a], tcp[a:e]))
			return true
		}
		o += l
	}
	return false
}

// MSSForMTU returns the TCP MSS that fills a tunnel MTU of mtu bytes: the
// MTU less the IP and TCP headers without options (20 + 20 for IPv4, 40 +
// 20 for IPv6; RFC 879, RFC 8200 §5).
func MSSForMTU(mtu int, ipv6 bool) uint16 {
	if ipv6 {
		return uint16(mtu - IPv6Len - TCPMinLen)
	}
	return uint16(mtu - IPv4MinLen - TCPMinLen)
}
