//go:build linux

package toobig

import (
	"net"
	"net/netip"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// ListenICMP opens a raw ICMPv6 socket in the calling thread's network
// namespace that passes "packet too big" alone (ICMP6_FILTER), for a
// gateway whose WAN addresses are the kernel's (shared address mode): the
// WAN's XDP program passes the errors to the kernel, which delivers them
// to the socket, checksum verified. It needs CAP_NET_RAW and IPv6.
func ListenICMP() (Source, error) {
	c, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypePacketTooBig)
	if err := c.IPv6PacketConn().SetICMPFilter(&f); err != nil {
		c.Close()
		return nil, err
	}
	return icmpSource{c}, nil
}

type icmpSource struct{ *icmp.PacketConn }

func (s icmpSource) ReadMessage(buf []byte) ([]byte, netip.Addr, error) {
	n, from, err := s.ReadFrom(buf)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	var a netip.Addr
	if ip, ok := from.(*net.IPAddr); ok {
		a, _ = netip.AddrFromSlice(ip.IP)
	}
	return buf[:n], a.Unmap(), nil
}
